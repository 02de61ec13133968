"""The runs' API proxy: the one way a run's modules reach the API server (``server``), what a request may be
(``accepting``), long-lived requests and their bounds (``streaming``, ``upgrading``), and reads answered from
the operator's informers (``cachereads``). Built by ``reactor.wiring``; runs learn its address from their
kubeconfig."""
