"""The fleet home: every agent a person may see, what needs attention first (home.py), and
the labels admins set on agents to filter by (labels.py)."""
