"""kubelint-ports: find Kubernetes port-allocation mistakes before they reach a cluster."""

__version__ = "0.1.0"
