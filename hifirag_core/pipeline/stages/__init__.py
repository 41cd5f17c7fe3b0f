"""The pipeline's stages as plain functions, one module per box of the stage diagram: records in, records out.

    query_plan ─► search ─► url_filter ─► fetch ─► sections ─► section_rank ─► (research) ─► writing ─►
    citations ─► final_answer

Each stage takes the question, the outputs of the stages it depends on and the runtime, and returns a
``StageOutput``: the rows for its warehouse table, the LLM calls it made, and (``value``) what a later stage
needs that the warehouse does not store. Everything a stage reads is in its signature: what the trail
derives between stages (the writer's sources, the answerability decision) is computed below the stages
(``pipeline.context``, ``pipeline.derived``) and passed in. Stages never raise for a bad model reply or a
page that failed to load (those become rows with a status); they raise ``BackendError`` when a backend is
down, so the orchestrator can retry, and then take the stage's fallback to go on with what the question has.

What each stage reads, writes and depends on is declared in ``hifirag_core.pipeline.specs``.
"""
