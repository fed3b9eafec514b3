"""The simulated kubelet, a part of ``SimCluster``: it starts the pods the API creates on a
node (in the state their template's ``simcluster.agentwatch.dev/state`` annotation asks
for), moves containers between kubectl states and restarts them, writes their logs, and
records the events a kubelet records on the way.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ApiError
from .events import EventRecorder
from .logs import LogBuffer, LogStore
from .pods import STATES, build_status
from .resources import PODS
from .scheduler import Scheduler
from .store import Store, WatchEvent
from .util import JSON, rfc3339, stable_hex
from .workloads import STATE_ANNOTATION


class Kubelet:
    """``SimCluster``'s pods and containers as a kubelet runs them (a mixin: the cluster
    provides the store and the rest)."""

    store: Store
    events: EventRecorder
    logs: LogStore
    scheduler: Scheduler

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.rt is not PODS:
            return
        meta = ev.new.obj["metadata"]
        if ev.type == "DELETED":
            self.logs.drop_pod(ev.namespace, meta["name"])
        elif ev.type == "ADDED" and not (ev.new.obj.get("status") or {}).get("conditions"):
            # Created through the API (status reset to Pending): "schedule and start" it
            # like the scheduler and kubelet would, shortly after.
            self.scheduler.call_later(0.05, lambda: self._kubelet_start(ev.namespace,
                                                                        meta["name"],
                                                                        meta["uid"]))

    def _kubelet_start(self, namespace: str, name: str, uid: str) -> None:
        state = "Running"

        def start(o: JSON) -> JSON | None:
            nonlocal state
            if o["metadata"]["uid"] != uid or (o.get("status") or {}).get("conditions"):
                return None
            o["spec"].setdefault("nodeName", "sim-worker")
            # A pod template may ask for a failing start (the demo's broken workloads); a
            # job's outcome is decided when it finishes.
            wanted = (o["metadata"].get("annotations") or {}).get(STATE_ANNOTATION)
            state = wanted if wanted in STATES and wanted not in ("Error", "Completed") \
                else "Running"
            names = [c["name"] for c in o["spec"]["containers"]]
            o["status"] = build_status(o, dict.fromkeys(names, state))
            return o

        try:
            pod = self.store.update(PODS, namespace, name, start)
        except ApiError:
            return  # deleted meanwhile
        if pod["metadata"]["uid"] == uid:
            for c in pod["spec"]["containers"]:
                self.logs.container(namespace, name, c["name"])
            self._startup_events(pod, state)

    def _startup_events(self, pod: JSON, state: str) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        node = spec.get("nodeName")
        if not node:
            self.events.record(pod, "FailedScheduling",
                               pod["status"]["conditions"][0]["message"], type="Warning")
            return
        self.events.record(pod, "Scheduled",
                           f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}")
        for c in spec["containers"]:
            fp = f"spec.containers{{{c['name']}}}"
            if state in ("ImagePullBackOff", "ErrImagePull"):
                self.events.record(pod, "Pulling", f'Pulling image "{c["image"]}"',
                                   field_path=fp, host=node)
                self.events.record(pod, "Failed", f'Failed to pull image "{c["image"]}": not found',
                                   type="Warning", field_path=fp, host=node)
                continue
            if state == "ContainerCreating":
                self.events.record(pod, "Pulling", f'Pulling image "{c["image"]}"',
                                   field_path=fp, host=node)
                continue
            self._started_events(pod, c, fp, node)
            if state == "CrashLoopBackOff":
                self.events.record(
                    pod, "BackOff", f"Back-off restarting failed container {c['name']} in pod "
                    f"{meta['name']}_{meta['namespace']}({meta['uid']})", type="Warning",
                    field_path=fp, host=node)

    def _started_events(self, pod: JSON, c: JSON, fp: str, node: str) -> None:
        self.events.record(pod, "Pulled", f'Container image "{c["image"]}" already present '
                                          "on machine", field_path=fp, host=node)
        self.events.record(pod, "Created", f"Created container: {c['name']}", field_path=fp,
                           host=node)
        self.events.record(pod, "Started", f"Started container {c['name']}", field_path=fp,
                           host=node)

    def set_pod_state(
        self, namespace: str, name: str, state: str, container: str | None = None, *,
        restarts: int | None = None, events: bool = True,
    ) -> JSON:
        """Move one container (or all) to a kubectl state, as the kubelet would report."""
        old = self.store.get(PODS, namespace, name).obj
        names = [c["name"] for c in old["spec"]["containers"]]
        targets = [container] if container else names

        def change(o: JSON) -> JSON:
            states = dict.fromkeys(targets, state)
            rs = dict.fromkeys(targets, restarts) if restarts is not None else None
            if state == "Pending":
                o["spec"].pop("nodeName", None)
            o["status"] = build_status(o, states, restarts=rs, old=o.get("status"),
                                       with_image_id=_has_image_ids(o))
            return o

        result = self.store.update(PODS, namespace, name, change)
        if events and result["spec"].get("nodeName"):
            node = result["spec"]["nodeName"]
            for cname in targets:
                c = next(x for x in result["spec"]["containers"] if x["name"] == cname)
                fp = f"spec.containers{{{cname}}}"
                if state in ("Running", "NotReady"):
                    self._started_events(result, c, fp, node)
                if state == "NotReady":
                    self.events.record(result, "Unhealthy", "Readiness probe failed: HTTP probe "
                                       "failed with statuscode: 503", type="Warning",
                                       field_path=fp, host=node)
                if state == "CrashLoopBackOff":
                    meta = result["metadata"]
                    self.events.record(
                        result, "BackOff", f"Back-off restarting failed container {cname} in "
                        f"pod {name}_{namespace}({meta['uid']})", type="Warning",
                        field_path=fp, host=node)
        return result

    def restart_container(
        self, namespace: str, pod: str, container: str | None = None, *,
        reason: str = "Error", exit_code: int = 1, crashloop: bool = True,
        events: bool = True,
    ) -> JSON:
        """The container exits and restarts: restartCount+1, lastState terminated, logs of
        the dead instance become ``previous``; then CrashLoopBackOff or Running again."""
        cur = self.store.get(PODS, namespace, pod).obj
        cname = container or cur["spec"]["containers"][0]["name"]
        cs: JSON = next((s for s in (cur.get("status") or {}).get("containerStatuses") or []
                         if s["name"] == cname), {})
        count = int(cs.get("restartCount", 0)) + 1
        started = ((cs.get("state") or {}).get("running") or {}).get("startedAt")
        now = rfc3339()
        last = {"exitCode": exit_code, "reason": reason, "startedAt": started or now,
                "finishedAt": now,
                "containerID": f"containerd://{stable_hex(f'{pod}/{cname}/{count}', 64)}"}
        self.logs.container(namespace, pod, cname).restart()
        new_state = "CrashLoopBackOff" if crashloop else "Running"

        def change(o: JSON) -> JSON:
            o["status"] = build_status(o, {cname: new_state}, restarts={cname: count},
                                       old=o.get("status"), last_terminated={cname: last},
                                       with_image_id=_has_image_ids(o))
            return o

        result = self.store.update(PODS, namespace, pod, change)
        if events:
            node = result["spec"].get("nodeName")
            fp = f"spec.containers{{{cname}}}"
            if crashloop:
                self.events.record(
                    result, "BackOff", f"Back-off restarting failed container {cname} in pod "
                    f"{pod}_{namespace}({result['metadata']['uid']})", type="Warning",
                    field_path=fp, host=node)
            else:
                c = next(x for x in result["spec"]["containers"] if x["name"] == cname)
                self._started_events(result, c, fp, node or "")
        return result

    def append_log(self, namespace: str, pod: str, container: str,
                   lines: str | Iterable[str]) -> int:
        """Append line(s) to the container's current log; followers get them at once."""
        batch = [lines] if isinstance(lines, str) else list(lines)
        return self.logs.container(namespace, pod, container).current.append(batch)

    def log_source(self, namespace: str, pod: str, container: str | None,
                   previous: bool) -> tuple[str, LogBuffer]:
        """The buffer ``GET .../pods/{pod}/log`` reads, with the API server's 400s."""
        obj = self.store.get(PODS, namespace, pod).obj
        names = [c["name"] for c in obj["spec"]["containers"]]
        init = [c["name"] for c in obj["spec"].get("initContainers") or []]
        if not container:
            if len(names) != 1:
                msg = (f"a container name must be specified for pod {pod}, "
                       f"choose one of: [{' '.join(names)}]")
                if init:
                    msg += f" or one of the init containers: [{' '.join(init)}]"
                raise ApiError(400, msg)
            container = names[0]
        if container not in names and container not in init:
            raise ApiError(400, f"container {container} is not valid for pod {pod}")
        logs = self.logs.container(namespace, pod, container)
        cs: JSON = next((s for s in (obj.get("status") or {}).get("containerStatuses") or []
                         if s.get("name") == container), {})
        if previous:
            if logs.previous is None:
                raise ApiError(400, f'previous terminated container "{container}" in pod '
                                    f'"{pod}" not found')
            return container, logs.previous
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and not cs.get("restartCount"):
            raise ApiError(400, f'container "{container}" in pod "{pod}" is waiting to start: '
                                f'{waiting.get("reason", "ContainerCreating")}')
        return container, logs.current


def _has_image_ids(pod: JSON) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return not statuses or any("imageID" in s for s in statuses)
