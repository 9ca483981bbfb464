"""Python client for umd: translate ops, run them remotely, move tensors.

The generated stubs (``umd_pb2``, ``umd_pb2_grpc``) come from the project's ``proto/umd.proto``
(``generate.sh``); :class:`Client` wraps them with numpy in and out.
"""

from .client import Client, Model, UmdError, STATUS_OK, STATUS_UNSUPPORTED

__all__ = ["Client", "Model", "UmdError", "STATUS_OK", "STATUS_UNSUPPORTED"]
