"""Machine translation: Hiero grammar extraction and storage, the language model, the SCFG
decoder (translation forests with cube pruning), k-best extraction and weight tuning."""
