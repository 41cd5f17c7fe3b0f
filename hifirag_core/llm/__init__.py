"""LLM decisions: prompts rendered, replies parsed, fallbacks applied."""
