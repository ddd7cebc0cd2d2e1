"""scaler.kube.shape_watch against the sandbox's API server, over HTTPS.

Covers: no table is an empty one; the ConfigMap ``tidal-shapes`` labelled
``tidal.dev/shapes`` is parsed (a bad entry left out and named), its
revision moves with each change and not without one, an unlabelled one or
one of another name is ignored, and its deletion empties the table; a
companion built by ``build_shape_companion`` is seen by owner and shape,
the user's Deployment is not, and a deleted companion is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib

from groundwork.kube.connection import connect
from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, _rtype
from scaler.kube.shape_watch import ShapeWatch
from scaler.policy.shapes.companion import build_shape_companion
from scaler.policy.shapes.declarations import ChosenShape
from tests.integration.scaler.support import eventually, user_deployment

CONFIGMAPS = _rtype("", "configmaps")
H100 = "NVIDIA-H100-80GB-HBM3"


def table(
    data: dict[str, str], *, name: str = "tidal-shapes", label: bool = True, ns: str = "kube-system"
) -> dict[str, object]:
    labels = {"tidal.dev/shapes": "true"} if label else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": data,
    }


async def test_the_table_and_the_companions(cluster: SandboxCluster) -> None:
    access = await connect(kubeconfig=str(cluster.kubeconfig))
    watch = ShapeWatch(access.api, namespace="kube-system")
    task = asyncio.create_task(watch.run())
    try:
        await eventually(lambda: watch.synced, "the watches synced")
        revision, empty = watch.table()
        assert empty.shapes == {}
        good = f"resource=nvidia.com/mig-3g.40gb, gpu-product={H100}, on-demand=5.27"
        cluster.store.create(CONFIGMAPS, table({"mig-3g.40gb": good, "bad": "resource=x"}))
        cluster.store.create(CONFIGMAPS, table({"l4": good}, label=False, ns="default"))
        cluster.store.create(CONFIGMAPS, table({"l4": good}, name="other"))
        await eventually(lambda: watch.table()[0] > revision, "the table")
        revision, parsed = watch.table()
        assert list(parsed.shapes) == ["mig-3g.40gb"]
        assert [p.key for p in watch.problems] == ["bad resource", "bad on-demand"]
        assert watch.table()[0] == revision  # read again: no change, no new revision

        user = cluster.store.create(DEPLOYMENTS, user_deployment())
        chosen = ChosenShape(parsed.shapes["mig-3g.40gb"])
        cluster.store.create(DEPLOYMENTS, build_shape_companion(user, chosen, replicas=2))
        await eventually(lambda: watch.companions("default/llama"), "the companion")
        seen = watch.companions("default/llama")["mig-3g.40gb"]
        assert (seen.name, seen.companion_of, seen.spec_replicas) == (
            "llama-mig-3g.40gb",
            "llama",
            2,
        )
        assert watch.owners() == ["default/llama"]

        cluster.store.delete(DEPLOYMENTS, "default", "llama-mig-3g.40gb")
        await eventually(lambda: not watch.owners(), "the companion forgotten")
        cluster.store.delete(CONFIGMAPS, "kube-system", "tidal-shapes")
        await eventually(lambda: not watch.table()[1].shapes, "the table emptied")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await access.api.close()
