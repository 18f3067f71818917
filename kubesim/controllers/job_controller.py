"""The Job controller: carries out what `jobs.reconcile` decides for each Job (status,
pods to create and delete, events, the TTL), with the back-offs between tries."""

import logging
import random

from kubesim.apiserver.defaults import omit_zero_job_counts
from kubesim.apiserver.errors import AlreadyExists, ApiError, NotFound
from kubesim.controllers import jobs
from kubesim.controllers.base import Controller, CreateBackoff, frees_resources

log = logging.getLogger(__name__)


class JobController(Controller):
    def __init__(self, store, recorder):
        super().__init__(store, recorder)
        self._create_backoff = CreateBackoff()
        self._failure_backoff: dict[str, jobs.FailureBackoff] = {}  # job uid -> its record
        # Namespaces where a quota changed or a pod ended: blocked Jobs retry at once.
        self._room_namespaces: set[str] = set()
        self._random = random.Random()

    def on_change(self, event_type: str, resource: str, obj: dict) -> None:
        namespace = obj["metadata"].get("namespace")
        frees = resource == "pods" and frees_resources(event_type, obj)
        if namespace and (frees or resource == "resourcequotas"):
            self._room_namespaces.add(namespace)

    def sync(self, pods: list[dict]) -> None:
        jobs_list, _ = self.store.list_refs("jobs")
        by_owner: dict[str, list[dict]] = {}
        for pod in pods:
            for ref in pod["metadata"].get("ownerReferences") or ():
                if ref.get("controller") and ref.get("kind") == "Job":
                    by_owner.setdefault(ref["uid"], []).append(pod)
        known = {job["metadata"]["uid"] for job in jobs_list}
        for uid in set(self._failure_backoff) - known:
            del self._failure_backoff[uid]  # the Job is gone
        for pod in pods:
            if jobs.tracked(pod) and not any(r.get("uid") in known for r in _owners(pod)):
                # The Job is gone: nobody will count the pod, let it go.
                self._untrack(pod["metadata"]["namespace"], pod["metadata"]["name"])
        if not jobs_list:
            return
        now = self.clock.now()
        with self.store.lock:
            room, self._room_namespaces = self._room_namespaces, set()
        for job in jobs_list:
            if job["metadata"]["namespace"] in room:
                self._create_backoff.clear(job["metadata"]["uid"])
            try:
                self._sync_job(job, by_owner.get(job["metadata"]["uid"], []), now)
            except ApiError as error:
                log.debug("job sync of %s: %s", job["metadata"]["name"], error)

    def _sync_job(self, job: dict, pods: list[dict], now) -> None:
        meta = job["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        backoff = self._failure_backoff.get(meta["uid"]) or jobs.FailureBackoff()
        actions = jobs.reconcile(job, pods, now, backoff)
        if actions.delete_job:
            # TTL ran out: the job and its pods go (the TTL controller deletes in background).
            self._ignore_missing(
                self.store.delete, "jobs", namespace, name, propagation_policy="Background"
            )
            self._create_backoff.clear(meta["uid"])
            return
        for pod_name in actions.delete:
            # Pods the controller deletes itself never count as failed.
            self._untrack(namespace, pod_name)
            self._ignore_missing(self.store.delete, "pods", namespace, pod_name)
            self.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod_name}")
        for kind, reason, message in actions.events:
            self.event(job, kind, reason, message)
        if actions.backoff.failures and not jobs.is_finished({"status": actions.status}):
            self._failure_backoff[meta["uid"]] = actions.backoff
        else:
            self._failure_backoff.pop(meta["uid"], None)
        if actions.create:
            actions.status["active"] += self._create_pods(job, actions.create)
        if omit_zero_job_counts(actions.status) != (job.get("status") or {}):
            self._write_status("jobs", {**job, "status": actions.status})
        # Counted in the status just written: now the pods may go.
        for pod_name in actions.untrack:
            self._untrack(namespace, pod_name)

    def _untrack(self, namespace: str, name: str) -> None:
        """Remove the job-tracking finalizer (a deleted pod then disappears)."""
        with self.store.lock:
            try:
                pod = self.store.get_ref("pods", namespace, name)
            except NotFound:
                return
            finalizers = pod["metadata"].get("finalizers") or []
            if jobs.TRACKING_FINALIZER not in finalizers:
                return
            meta = {**pod["metadata"]}
            meta["finalizers"] = [f for f in finalizers if f != jobs.TRACKING_FINALIZER]
            if not meta["finalizers"]:
                del meta["finalizers"]
            self.store.update("pods", namespace, {**pod, "metadata": meta})

    def _create_pods(self, job: dict, count: int) -> int:
        """Create up to `count` pods; stop at the first refusal (e.g. quota), record it
        as a FailedCreate event and back off before trying again."""
        uid = job["metadata"]["uid"]
        if self._create_backoff.waiting(uid):
            return 0
        created = 0
        for _ in range(count):
            pod = jobs.pod_from_template(job, jobs.pod_name(job["metadata"]["name"], self._random))
            try:
                self.store.create("pods", job["metadata"]["namespace"], pod)
            except AlreadyExists:
                continue  # name clash of the random suffix: next sync retries
            except ApiError as error:
                self.event(job, "Warning", "FailedCreate", f"Error creating: {error.message}")
                self._create_backoff.refused(uid)
                return created
            created += 1
            self.event(job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
        self._create_backoff.clear(uid)
        return created


def _owners(pod: dict) -> list[dict]:
    return [r for r in pod["metadata"].get("ownerReferences") or () if r.get("controller")]
