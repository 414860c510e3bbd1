"""The dense reader: encoders by name, documents read as passages, int8 vectors beside an
index's postings and their exact search (Wang et al. 2024; Dai & Callan 2019, §3.2)."""
