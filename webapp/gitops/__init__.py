"""GitOps events derived from Flux objects, observed through the shared watches."""
