"""Training the associative adapter (Madeleine 4.4, appendix B): the simulated-lives corpus
(`lives`, with `life_prompt` and `curation` for writing and cleaning it), the InfoNCE objective
on the summed score (`objective`), the held-out cue evaluation (`evaluation`) and the training
loop (`train`). Only `dcpm adapter train`, `workers/train_adapter.py` and the scripts use it;
the daemon never imports it."""
