"""The batch/v1 controllers: Jobs run their pods to Complete or Failed; CronJobs keep
``status.active``, ``lastSuccessfulTime`` and their history limits."""

from __future__ import annotations

import time

from .controller_base import (
    STATE_ANNOTATION,
    ControllerBase,
    is_terminating,
    omit_zero,
    pod_ready,
    random_suffix,
)
from .errors import ApiError
from .resources import (
    CRONJOBS,
    JOBS,
    PODS,
)
from .util import JSON, json_copy, parse_rfc3339, rfc3339


class BatchControllers(ControllerBase):
    def _job(self, ns: str, name: str) -> None:
        job = self._find(JOBS, ns, name)
        if job is None or is_terminating(job):
            return
        spec, old = job["spec"], job.get("status") or {}
        done = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for c in old.get("conditions") or [])
        pods = self._owned(PODS, ns, job["metadata"]["uid"])
        now = time.time()
        for p in pods:
            self._finish_job_pod(job, p, now)
        pods = self._owned(PODS, ns, job["metadata"]["uid"])
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in
                  ("Succeeded", "Failed") and not is_terminating(p)]
        completions = int(spec.get("completions") or 1)
        parallelism = int(spec.get("parallelism", 1))
        backoff = int(spec.get("backoffLimit", 6))
        status: JSON = {"startTime": old.get("startTime") or rfc3339(),
                        "uncountedTerminatedPods": {}}
        conditions = list(old.get("conditions") or [])
        if not done and not spec.get("suspend"):
            if succeeded >= completions:
                finished = rfc3339()
                conditions = [_job_condition("SuccessCriteriaMet", "CompletionsReached",
                                             "Reached expected number of succeeded pods"),
                              _job_condition("Complete", "CompletionsReached",
                                             "Reached expected number of succeeded pods")]
                status["completionTime"] = finished
                self._event(job, "Completed", "Job completed", "job-controller")
            elif failed > backoff:
                conditions = [_job_condition("FailureTarget", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit"),
                              _job_condition("Failed", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit")]
                self._event(job, "BackoffLimitExceeded",
                            "Job has reached the specified backoff limit", "job-controller",
                            "Warning")
                for p in active:
                    self._delete_pod(job, p, "job-controller")
                active = []
            else:
                room = min(parallelism, completions - succeeded) - len(active)
                for _ in range(max(room, 0)):
                    created = self._create_pod(job, spec.get("template") or {},
                                               f"{name}-{random_suffix()}",
                                               component="job-controller")
                    if created is not None:
                        active.append(created)
        elif old.get("completionTime"):
            status["completionTime"] = old["completionTime"]
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if pod_ready(p))
        status["succeeded"] = succeeded
        status["failed"] = failed
        status["terminating"] = sum(1 for p in pods if is_terminating(p))
        if conditions:
            status["conditions"] = conditions
        omit_zero(status, "active", "succeeded", "failed")
        if not status.get("terminating"):
            status.pop("terminating", None)
        self._write_status(JOBS, ns, name, status)
        if active:  # come back when the running pods are due to finish
            self.enqueue("jobs", ns, name, delay=self.job_seconds / 2)

    def _finish_job_pod(self, job: JSON, pod: JSON, now: float) -> None:
        """The simulated kubelet runs a job's container for ``job_seconds``."""
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or is_terminating(pod):
            return
        started = status.get("startTime")
        if started and now - parse_rfc3339(started) < self.job_seconds:
            return
        outcome = ((pod["metadata"].get("annotations") or {}).get(STATE_ANNOTATION))
        state = "Error" if outcome == "Error" else "Completed"
        try:
            self.cluster.set_pod_state(pod["metadata"]["namespace"], pod["metadata"]["name"],
                                       state, events=False)
        except ApiError:
            return

    def _cronjob(self, ns: str, name: str) -> None:
        cj = self._find(CRONJOBS, ns, name)
        if cj is None or is_terminating(cj):
            return
        jobs = self._owned(JOBS, ns, cj["metadata"]["uid"])
        active, succeeded, failed = [], [], []
        last_success = (cj.get("status") or {}).get("lastSuccessfulTime")
        for j in jobs:
            conds = {c.get("type"): c for c in (j.get("status") or {}).get("conditions") or []
                     if c.get("status") == "True"}
            if "Complete" in conds:
                succeeded.append(j)
                done_at = (j.get("status") or {}).get("completionTime")
                if done_at and (not last_success or done_at > last_success):
                    last_success = done_at
            elif "Failed" in conds:
                failed.append(j)
            elif not is_terminating(j):
                active.append(j)
        spec = cj["spec"]
        for finished, limit in ((succeeded, int(spec.get("successfulJobsHistoryLimit", 3))),
                                (failed, int(spec.get("failedJobsHistoryLimit", 1)))):
            finished.sort(key=lambda j: j["metadata"].get("creationTimestamp", ""))
            for j in finished[:max(len(finished) - limit, 0)]:
                self.cluster.delete_object(JOBS, ns, j["metadata"]["name"])
                self._event(cj, "SuccessfulDelete", f"Deleted job {j['metadata']['name']}",
                            "cronjob-controller")
        status = json_copy(cj.get("status") or {})
        if active:
            status["active"] = [{"kind": "Job", "namespace": ns, "name": j["metadata"]["name"],
                                 "uid": j["metadata"]["uid"], "apiVersion": "batch/v1",
                                 "resourceVersion": j["metadata"]["resourceVersion"]}
                                for j in sorted(active, key=lambda j: j["metadata"]["name"])]
        else:
            status.pop("active", None)
        if last_success:
            status["lastSuccessfulTime"] = last_success
        self._write_status(CRONJOBS, ns, name, status)


def _job_condition(type_: str, reason: str, message: str) -> JSON:
    now = rfc3339()
    return {"type": type_, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}
