"""TVM's ``python -m tvm.exec.*`` entry points: ``python -m tvmrt.exec.rpc_server``."""
