"""The kopf operator that reconciles infra.maslab.io/v1 Application resources."""
