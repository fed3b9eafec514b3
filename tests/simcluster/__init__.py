"""Tests of the simulated Kubernetes cluster (webapp.simcluster)."""
