"""``hifirag credibility`` and ``testset fresh``: the source-prior experiment and fresh-knowledge test sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import EXPECTED, DataRoot, SetOpt, console, err, fail, in_prefect, setup, starting_flow
from hifirag_core.config import ConfigError, parse_overrides
from hifirag_core.corpus.store import CorpusError


def credibility(
    queries: Annotated[int, typer.Option(help="Queries drawn from MedQuAD's questions (half tune, half report).")] = 600,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Experiment setting key=value (repeatable), "
                                                   "e.g. strengths=\\[0,0.5,1] or correlations=\\[0,0.5,1].")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for the Markdown summary and the plot "
                                             "\\[default: <data root>/reports/credibility].")] = None,
    data_root: DataRoot = None,
) -> None:
    """When does the source prior help retrieval? Sweep its strength against how well source predicts truth.

    MedQuAD answers rendered as seven kinds of page, some corrupted (changed dose, negated claim,
    wrong date) at rates that follow source type from not at all to totally. Similarity x
    prior ** lambda, with smoothing and with weights learned from simulated feedback: P@5 and
    nDCG@10 of relevant-and-correct documents, the adversarial hit rate and topical P@5, with
    bootstrap intervals; the default lambda is chosen on the tune half of the queries. Writes a
    Markdown summary and a plot, and every table to the warehouse. The first run embeds about
    5,500 texts (minutes on two cores); the vectors are cached, so later runs take about a minute.

    [bold]Example[/bold]: hifirag credibility --queries 600 --set 'strengths=\\[0,0.25,0.5,1]'
    """
    root = setup(data_root)
    settings = [f"n_queries={queries}", *(set_ or [])]
    from hifirag_core.evaluation.credibility_experiment import CredibilityExperimentConfig

    try:
        config = CredibilityExperimentConfig.model_validate(parse_overrides(settings))
    except (ConfigError, ValueError) as exc:
        fail(ValueError(f"invalid experiment setting: {exc}"))
    if not config.medquad_path().exists():
        fail(CorpusError(f"{config.medquad_path()} is missing: the experiment reads MedQuAD from the shared data"))
    credibility_experiment = starting_flow("flows.credibility", "credibility_experiment")

    result = in_prefect(root, credibility_experiment, settings=settings, data_root=str(root),
                         out_dir=str(out) if out else None)
    console.print(Path(result["summary"]).read_text(encoding="utf-8"), highlight=False, markup=False)
    console.print(f"\nDefault strength (tune half): lambda = {result['default_strength']:g}\nPlot: {result['plot']}\n"
                  f"Tables: run {result['run_id']} (credibility_summary, credibility_query_results, "
                  "credibility_rates, credibility_corpus, credibility_weights)", highlight=False, markup=False)


def fresh_testset(
    after: Annotated[str, typer.Option(help="Cutoff day, YYYY-MM-DD: every pair rests on a source published after it.")],
    n: Annotated[int, typer.Option("--n", help="How many pairs to keep.")],
    out: Annotated[Path, typer.Option(help="The JSONL to write (MMU-RAGent: query, reference, iid); the provenance "
                                      "goes beside it as NAME.provenance.json.")],
    style: Annotated[str, typer.Option(help="Examples to imitate: mmu:N (MMU-RAGent validation, never its first 100 "
                                       "lines) or FILE.jsonl:N.")] = "mmu:10",
    seed: Annotated[int, typer.Option(help="Chooses the examples and seeds every generator call.")] = 0,
    source: Annotated[str, typer.Option(help="gemini (Google Search grounding, needs GEMINI_API_KEY), offline (the "
                                        "labelled stand-in over the local corpus) or auto (gemini when the key "
                                        "is set).")] = "auto",
    model: Annotated[str | None, typer.Option(help="Generating model, also asked without search for the baseline "
                                              "check \\[default: models.writer].")] = None,
    testset_set: Annotated[list[str] | None, typer.Option("--testset-set", help="Builder setting key=value "
                                                          "(repeatable), e.g. near_duplicate_threshold=0.9.")] = None,
    set_: SetOpt = None,
    data_root: DataRoot = None,
) -> None:
    """Build a fresh-knowledge test set: question-answer pairs about what was published after a day.

    With a Gemini key, prompt A.6 goes to Gemini with Google Search grounding; each pair keeps the
    sources that grounded it, fetched and dated. A pair is dropped, with its reason, when no source is
    dated after the cutoff, when it nearly duplicates another pair, or when the same model answers it
    without search. Without a key, a clearly labelled offline stand-in draws pairs from the local
    corpus's pages dated after the cutoff. Prints how many pairs each check dropped.

    [bold]Example[/bold]: hifirag testset fresh --after 2025-02-01 --n 100 --style mmu:10 --out fresh-2025.jsonl
    """
    root = setup(data_root)
    from hifirag_core.testset.testset_plan import plan_fresh_set

    settings = list(testset_set or []) + ([f"model={model}"] if model else [])
    values = {"after": after, "n": n, "style": style, "seed": seed, "source": source}
    try:  # validate before Prefect starts
        plan = plan_fresh_set(values, out=out, data_root=root, settings=settings, overrides=set_ or [])
    except (*EXPECTED, ValueError) as exc:
        fail(exc)
    if plan.source == "offline":
        err.print("[yellow]No Gemini key (GEMINI_API_KEY): building the OFFLINE STAND-IN from the local corpus, "
                  "not fresh knowledge.[/yellow]", highlight=False)
    build_fresh_testset = starting_flow("flows.testset", "build_fresh_testset")

    result = in_prefect(root, build_fresh_testset, **values, out=str(out), settings=settings,
                         overrides=set_ or [], data_root=str(root))
    from rich.markdown import Markdown

    console.print(Markdown(result["markdown"]))
    console.print(f"Pairs: [bold]{result['out']}[/bold]\nProvenance: {result['provenance']}\n"
                  f"Evaluate it: hifirag eval --dataset {result['out']} --variants "
                  "baseline_q,baseline_prompt,rag,rag_url_filter,rag_filters,final", highlight=False)
    if result["status"] != "complete":
        err.print(f"[yellow]note:[/yellow] {result['counts']['kept']} of {n} pairs kept before the generator "
                  "ran out; raise --testset-set max_calls=... or lower --n", highlight=False)
