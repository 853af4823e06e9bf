"""`python -m workers.train_adapter CORPUS.jsonl ... -o DIR [options]`: train the associative
query adapter in a process of its own (a GPU host, a batch queue). The same command as
`dcpm adapter train`, with the same options."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from dcpm.cli.main import main as dcpm

    dcpm(["adapter", "train", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
