"""Packaging for running where the endpoint lives: Kubernetes manifests (``loadtest k8s render``)."""
