"""`dcpm adapter …`, a Typer sub-app registered as `adapter`: train an associative query adapter
(Madeleine 4.3-4.4) on simulated lives, or show an adapter's manifest and held-out metrics. Heavy
imports stay inside the commands so that `dcpm --help` never loads torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from dcpm.cli.output import err, heading, out, settings

adapter_app = typer.Typer(help="Associative query adapter (Madeleine): train, inspect.", no_args_is_help=True)


def _option(help: str):  # type: ignore[no-untyped-def]
    return typer.Option(help=help + " (default: from settings)", show_default=False)


@adapter_app.command("train")
def train(
    corpus: Annotated[list[Path], typer.Argument(help="Simulated-life JSONL files (scripts/lives/corpus/*.jsonl).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Adapter directory to write.")],
    name: Annotated[Optional[str], typer.Option(help="Adapter name (default: the directory's name).")] = None,
    tau: Annotated[Optional[float], _option("InfoNCE temperature")] = None,
    rank: Annotated[Optional[int], _option("LoRA rank")] = None,
    alpha: Annotated[Optional[int], _option("LoRA alpha")] = None,
    dropout: Annotated[Optional[float], _option("LoRA dropout")] = None,
    lr: Annotated[Optional[float], _option("Learning rate")] = None,
    batch_size: Annotated[Optional[int], _option("Rows per step")] = None,
    epochs: Annotated[Optional[int], _option("Epochs")] = None,
    negative_max_cos: Annotated[Optional[float], _option("Same-source facts at least this close to the gold "
                                                         "are not negatives")] = None,
    holdout: Annotated[Optional[float], _option("Share of personas held out for validation")] = None,
    seed: Annotated[Optional[int], _option("Random seed")] = None,
    query_form: Annotated[Optional[str], _option("summed (E(q) + E_θ(q), two passes per query) or adapted "
                                                 "(E_θ(q) alone, one merged pass)")] = None,
    max_steps: Annotated[Optional[int], typer.Option(help="Stop after this many steps.")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda (default: DCPM_EMBEDDER_DEVICE).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Train a query-side LoRA for the configured embedder on simulated lives (InfoNCE on the summed
    score, same-source negatives) and write it, with its manifest, to OUTPUT."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from dcpm.adapter.training.lives import read_lives
    from dcpm.adapter.training.train import TrainingPlan
    from dcpm.adapter.training.train import train as train_adapter
    from dcpm.embedding import load_embedder

    config = settings(**({"embedder_device": device} if device else {}))
    lives = read_lives(corpus)
    plan = TrainingPlan.from_settings(config, tau=tau, rank=rank, alpha=alpha, dropout=dropout, lr=lr,
                                      batch_size=batch_size, epochs=epochs, negative_max_cos=negative_max_cos,
                                      holdout=holdout, seed=seed, max_steps=max_steps,
                                      query_form=query_form)
    with err.status(f"loading {config.embedder}..."):
        embedder = load_embedder(config)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn())
    with Progress(*columns, console=err) as bar:
        task = bar.add_task(f"training on {len(lives)} personas ({embedder.device})", total=None, loss="-")

        def advance(step: int, total: int, loss: float) -> None:
            bar.update(task, completed=step, total=total, loss=f"{loss:.3f}")

        manifest = train_adapter(embedder, lives, plan, output, name=name, corpus_files=corpus, progress=advance)
    if as_json:
        out.print_json(manifest.model_dump_json())
        return
    out.print(f"wrote {output}: {manifest.training.steps} steps over {manifest.training.rows} rows "
              f"in {manifest.training.seconds:.0f}s on {manifest.training.device}")
    _print_metrics(manifest.metrics)


@adapter_app.command("info")
def info(path: Annotated[str, typer.Argument(help="Adapter directory, or 'default' for the shipped one.")],
         as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """The adapter's manifest: backbone, training data, hyperparameters, held-out metrics."""
    from dcpm.adapter.encoder import adapter_directory
    from dcpm.adapter.manifest import query_form, read_manifest
    from dcpm.errors import Invalid

    directory = adapter_directory(path)
    if directory is None:
        raise Invalid("'none' names no adapter")
    manifest = read_manifest(directory)
    if as_json:
        out.print_json(manifest.model_dump_json())
        return
    out.print(heading(manifest.name, f"({directory})"))
    out.print(f"  backbone: {manifest.backbone.name} ({manifest.backbone.fingerprint}, {manifest.backbone.pooling})")
    training = manifest.training
    out.print(f"  trained on {training.rows} rows, {training.facts} facts, {training.personas} personas "
              f"(data {training.data_hash[:12]}); {training.steps} steps, {training.seconds:.0f}s "
              f"on {training.device}")
    out.print(f"  hyperparameters: {json.dumps(training.hyperparameters)}")
    served = "E_θ(q) alone, one pass" if query_form(manifest) == "adapted" else "normalize(E(q) + E_θ(q)), two passes"
    out.print(f"  served: {served}"
              f", at strength {manifest.strength:g} (DCPM_ADAPTER_STRENGTH overrides it)")
    if manifest.metrics and manifest.strength != 1:
        out.print("  the held-out recall below was measured as trained, at strength 1")
    _print_metrics(manifest.metrics)


CANDIDATES = {"heldout": "candidates: held-out facts of the query's source",
              "heldout_and_training": "candidates: held-out and training facts of the query's source"}


def _print_metrics(metrics: dict) -> None:
    if not metrics:
        out.print("  no held-out metrics (trained with holdout 0)")
    for pool, report in metrics.items():
        table = Table(title=f"held-out recall, {CANDIDATES.get(pool, pool)}", show_edge=False)
        for column in ("encoder", "source", "queries", "n", "R@1", "R@5", "R@10", "R@50", "MRR"):
            table.add_column(column)
        for encoder, by_source in report.items():
            for source, by_kind in by_source.items():
                for kind, row in by_kind.items():
                    if row.get("n"):
                        table.add_row(encoder, source, kind, str(row["n"]),
                                      *(f"{row[k]:.3f}" for k in ("R@1", "R@5", "R@10", "R@50", "MRR")))
        out.print(table)
