"""Retrieval methods behind one base class and a registry by name (Hieber & Riezler 2015, §3 and §5;
TR paper)."""
