"""Scale out on Ray Serve: the same models and routes as ``tvmrt serve``, in N replicas.

Each replica is a :class:`TvmrtDeployment`: it loads the artifacts as K executors each
(:func:`~tvmrt.serve.model.load_model`) and answers through the same
:meth:`~tvmrt.serve.app.InferenceApp.handle` as the uvicorn server, so clients see one
protocol whichever way the model is deployed. Ray's HTTP proxy spreads requests over the
replicas and Ray places them over the cluster's nodes.

Examples
--------
From Python (on a running cluster, or a local one that ``serve.run`` starts)::

    from ray import serve
    from tvmrt.serve.ray import deployment

    app = deployment(num_replicas=2).bind({"mobilenet": "/models/mobilenet_v1"}, workers=1)
    serve.run(app, route_prefix="/")

or with Ray's CLI: ``serve run tvmrt.serve.ray:app_builder models=mobilenet=/models/mbv1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tvmrt.artifact import find_artifact
from tvmrt.error import InvalidArgumentError
from tvmrt.serve.app import InferenceApp
from tvmrt.serve.dynamic import parse_signature
from tvmrt.serve.model import load_model

__all__ = ["TvmrtDeployment", "deployment", "app_builder"]


class TvmrtDeployment:
    """One Ray Serve replica serving ``models`` (name -> artifact path).

    Parameters
    ----------
    models
        Model name -> artifact folder or factory library, as ``tvmrt serve`` takes them.
    workers, max_queue, timeout, batch_delay
        As ``tvmrt serve --workers/--max-queue/--timeout/--batch-delay-ms`` (in seconds),
        per replica.
    signatures
        Model name -> its inputs' ``NAME:DTYPE:DIMS``, as ``tvmrt serve --input`` takes
        them (a Relay VM model needs one per input: :mod:`tvmrt.serve.dynamic`).
    """

    def __init__(
        self,
        models: Mapping[str, str],
        workers: int = 1,
        max_queue: int = 64,
        timeout: float = 30.0,
        batch_delay: float | None = None,
        signatures: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        given = dict(signatures or {})
        unknown = sorted(set(given) - set(models))
        if unknown:
            raise InvalidArgumentError(f"signatures for model(s) {unknown} that are not served")
        served = [
            load_model(
                name,
                find_artifact(path),
                workers,
                None,
                max_queue,
                timeout,
                batch_delay,
                [parse_signature(text) for text in given.get(name, ())],
            )
            for name, path in models.items()
        ]
        self.app = InferenceApp(served)

    async def __call__(self, request: Any) -> Any:
        """Answer a ``starlette.requests.Request`` from Ray's HTTP proxy."""
        from starlette.responses import Response

        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        reply = await self.app.handle(request.method, request.url.path, headers, body)
        return Response(reply.body, status_code=reply.status, headers=reply.headers)

    def __del__(self) -> None:
        app = getattr(self, "app", None)  # absent if __init__ failed
        for model in app.models.values() if app is not None else ():
            model.close(wait=False)


def deployment(num_replicas: int = 1, num_cpus: float = 1.0, **options: Any) -> Any:
    """A Ray Serve deployment of :class:`TvmrtDeployment`; call ``.bind(models, ...)`` on it.

    ``options`` go to ``ray.serve.deployment`` (e.g. ``max_ongoing_requests``,
    ``autoscaling_config``).
    """
    try:
        from ray import serve
    except ImportError as exc:
        raise ImportError("tvmrt.serve.ray needs Ray Serve: pip install 'ray[serve]'") from exc
    return serve.deployment(
        TvmrtDeployment,
        name="tvmrt",
        num_replicas=num_replicas,
        ray_actor_options={"num_cpus": num_cpus},
        **options,
    )


def app_builder(args: Mapping[str, str]) -> Any:
    """For ``serve run tvmrt.serve.ray:app_builder models=NAME=PATH[,NAME=PATH] ...``.

    Arguments: ``models`` (required), ``replicas``, ``workers``, ``max_queue``, ``timeout``.
    """
    spec = args.get("models")
    if not spec:
        raise InvalidArgumentError("app_builder needs models=NAME=PATH[,NAME=PATH...]")
    models = {}
    for item in spec.split(","):
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InvalidArgumentError(f"models entry {item!r} is not NAME=PATH")
        models[name] = path
    dep = deployment(num_replicas=int(args.get("replicas", 1)))
    return dep.bind(
        models,
        workers=int(args.get("workers", 1)),
        max_queue=int(args.get("max_queue", 64)),
        timeout=float(args.get("timeout", 30.0)),
    )
