"""Tests of the simulated Kubernetes cluster (simkube)."""
