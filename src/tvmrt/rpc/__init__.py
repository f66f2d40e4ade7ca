"""TVM's RPC protocol: the wire codec, a server for boards, and a tracker.

``wire`` frames packets and handshakes, ``codec`` encodes argument sequences in both
dialects (TVM <= 0.20 type codes, TVM >= 0.21 tvm-ffi type indices). Importing the
package loads nothing else.
"""
