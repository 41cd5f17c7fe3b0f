"""Fresh-knowledge test sets: question-answer pairs about what was published after a cutoff date.

The paper's Test2025 set came from pasting prompt A.6 into a chat interface with live search. Here
the same prompt drives a model with search grounding (Gemini + Google Search), every pair keeps the
sources that grounded it with their publication dates, and three checks the paper did not make drop
pairs, each with its reason: no source dated after the cutoff, a near-duplicate of another pair,
and a pair the model already answers without search. Offline, a labelled stand-in draws pairs from
the local corpus's pages dated after the cutoff. Nothing here imports Prefect;
``flows/testset.py`` orders the steps.
"""
