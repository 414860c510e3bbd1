"""Retrieval methods behind one base class and a registry by name (001 §3 and §5; 002)."""
