"""The read path (DCPM 2.4), never an LLM: `query` encodes the query (E, or E + E_θ with the
associative adapter), `search` runs the hybrid ANN and hydrates hits with their supersedes
chains, `fusion` scores candidates on an absolute scale (calibrated dense plus saturated
lexical evidence, whose half point `lexical_scale` fits to the size of the store), `grouping`
folds a turn into the items extracted from it, `surfacing` brings up graph nodes whose evidence
contains a hit, and `context_block` renders the token-budgeted block for the prompt."""
