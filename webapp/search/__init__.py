"""The command palette's search: an index per agent of its cluster's objects (names, kinds,
namespaces and labels only: index.py), kept by a light listing (listing.py, keeper.py), and
queried with the person's access (query.py)."""
