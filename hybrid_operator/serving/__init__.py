"""The HTTP the operator serves: probes and metrics (``health``), their TLS (``tlsserving``) and bearer-token
check (``metricsauth``), and the receiver of the metrics roles report (``receiving``, ``usermetrics``).
"""
