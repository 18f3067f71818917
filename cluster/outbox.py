"""Work that must reach the cluster exactly as the database last said, at least once.

The machinery is written once here; each kind of work is one `Outbox`: a model
with the `OutboxRow` fields (one row per unit of work, e.g. per team) and a
Celery task that takes the row's key. Team sync (provisioning) is the first
user; batch release at window open is the second. The steps:

- `mark(key)`: the unit's wanted state changed. Bumps `generation` in the same
  transaction as the change, so a crash or a broker outage loses nothing.
- `changed(key)`: mark, and queue the task once the transaction commits.
- `enqueue(keys)`: send the tasks; a broker that is down is logged, not
  raised (the sweep sends what could not be). With a `batch_task`, several
  keys go `batch_size` to a message of it (the sweep's catch-up after a
  restart: one claim and one read of the wanted state per batch, not per unit).
- `claim(key)`: the task takes the unit with one conditional UPDATE of a
  lease (`claimed_until`), so two workers never do it at once and the lease
  of a worker that died runs out by itself. Returns a token, or None.
- `finish(key, token, generation)`: done up to `generation`, lease released,
  unless the generation moved meanwhile (then go round again).
- `claim_many(keys)` / `finish_many({key: generation}, token)`: the same for a
  batch of units with one UPDATE each (a burst of thousands: three statements a
  message, not three a unit); `finish_each` when each unit records fields of
  its own (one UPDATE with a CASE per field).
- `release(key, token)`: give the lease back without finishing.
- `due()` / `sweep()`: the units marked and not done whose message was lost,
  or whose worker died, queued again (run it from beat).
"""

import logging
import uuid
from collections import defaultdict
from datetime import timedelta

from django.db import IntegrityError, models, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone
from django.utils.module_loading import import_string

log = logging.getLogger(__name__)


class OutboxRow(models.Model):
    """The fields the outbox needs on a row of work (abstract: add your own)."""

    # Goes up with every change of what is wanted; `synced_generation` is the
    # last one the work was done for.
    generation = models.PositiveBigIntegerField(default=1)
    synced_generation = models.PositiveBigIntegerField(default=0)
    # The generation a permanent error stopped: not retried until it changes.
    refused_generation = models.PositiveBigIntegerField(default=0)
    queued_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True, db_index=True)
    claim_token = models.CharField(max_length=32, blank=True)

    class Meta:
        abstract = True


class Outbox:
    """One kind of work: `model` (an OutboxRow) keyed by `key` (a field name),
    done by the Celery task at dotted path `task`, leased for `lease()` seconds;
    optionally `batch_task`, which takes a list of up to `batch_size()` keys."""

    def __init__(self, model, *, key, task, lease, batch_task=None, batch_size=lambda: 1):
        self.model = model
        self.key = key
        self.task = task
        self.lease = lease
        self.batch_task = batch_task
        self.batch_size = batch_size

    def rows(self, keys=None):
        if keys is None:
            return self.model.objects.all()
        return self.model.objects.filter(**{f"{self.key}__in": list(keys)})

    def row(self, key):
        return self.model.objects.filter(**{self.key: key})

    def ensure(self, key):
        """Create the unit's row if it has none (one query when it exists)."""
        if not self.row(key).exists():
            try:
                with transaction.atomic():
                    self.model.objects.create(**{self.key: key}, generation=0)
            except IntegrityError:
                pass  # created meanwhile by another process

    def mark(self, key, **fields):
        """Record that the unit's wanted state changed; `fields` are written with the
        bump (e.g. a status). One UPDATE when the row exists (the usual case: a unit
        is marked many times, made once); when not, the row is made as `mark_many`
        makes it (an INSERT that yields to a concurrent one, no savepoint) and the
        UPDATE runs again."""
        if self.row(key).update(generation=F("generation") + 1, **fields):
            return
        self.model.objects.bulk_create(
            [self.model(**{self.key: key}, generation=0)], ignore_conflicts=True
        )
        self.row(key).update(generation=F("generation") + 1, **fields)

    def mark_many(self, keys, **fields):
        """`mark` for several units at once: two queries, however many."""
        keys = sorted(set(keys))
        self.model.objects.bulk_create(
            [self.model(**{self.key: key}, generation=0) for key in keys], ignore_conflicts=True
        )
        self.rows(keys).update(generation=F("generation") + 1, **fields)

    def changed(self, key, **fields):
        """Mark the unit and queue its task once the transaction commits. No savepoint:
        nothing in `mark` is caught and carried on from, so its error (if any) ends
        the caller's transaction as it would have with one."""
        with transaction.atomic(savepoint=False):
            self.mark(key, **fields)
            transaction.on_commit(lambda: self.enqueue([key]))

    def enqueue(self, keys):
        """Queue the task for each key; the keys queued (a broker outage is logged).

        `queued_at` is written before the messages go out, so a worker that
        starts at once always sees its claim (`last_attempt_at`) later than the
        queueing.
        """
        keys = list(keys)
        if not keys:
            return []
        size = self.batch_size() if self.batch_task else 1
        if len(keys) > 1 and size > 1:
            task = import_string(self.batch_task)
            batches = [keys[i : i + size] for i in range(0, len(keys), size)]
            messages = [(batch, batch) for batch in batches]
        else:
            task = import_string(self.task)
            messages = [(key, [key]) for key in keys]  # (the task's argument, its keys)
        self.rows(keys).update(queued_at=timezone.now())
        queued, lost = [], []
        for argument, sent in messages:
            try:
                task.apply_async((argument,), retry=False)
            except Exception as exc:  # the broker's errors vary by transport
                log.warning("could not queue %s(%s) (the sweep will): %s", task.name, argument, exc)
                lost.extend(sent)
            else:
                queued.extend(sent)
        self.rows(lost).update(queued_at=None)
        return queued

    def claim(self, key, now=None, *, pending=None):
        """Take the unit with one conditional UPDATE; a token, or None.

        None when another worker holds a live lease, or when `pending` does
        not hold: a Q saying there is work to do, usually `newer_generation()`;
        None claims anyway (a forced run).
        """
        now = now or timezone.now()
        token = uuid.uuid4().hex
        claimable = self.row(key).filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        if pending is not None:
            claimable = claimable.filter(pending)
        claimed = claimable.update(
            claimed_until=now + timedelta(seconds=self.lease()),
            claim_token=token,
            last_attempt_at=now,
        )
        return token if claimed else None

    def claim_many(self, keys, now=None, *, pending=None):
        """`claim` for several units with one UPDATE: the token they now hold (read
        the rows back with `claim_token=token`)."""
        now = now or timezone.now()
        token = uuid.uuid4().hex
        claimable = self.rows(keys).filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
        if pending is not None:
            claimable = claimable.filter(pending)
        claimable.update(
            claimed_until=now + timedelta(seconds=self.lease()),
            claim_token=token,
            last_attempt_at=now,
        )
        return token

    @staticmethod
    def newer_generation():
        """The usual `pending` for `claim`: marked since the work was last done."""
        return Q(generation__gt=F("synced_generation"))

    def holding(self, key, token):
        """The unit's row, only while `token` holds its lease (for UPDATEs)."""
        return self.row(key).filter(claim_token=token)

    def finish(self, key, token, generation, **fields):
        """Done up to `generation`: record it with `fields` and release the lease.
        False (nothing written) if the generation moved meanwhile."""
        return bool(
            self.holding(key, token)
            .filter(generation=generation)
            .update(**fields, synced_generation=generation, claimed_until=None, claim_token="")
        )

    def finish_many(self, generations, token, **fields):
        """`finish` for several units, {key: generation}: one UPDATE per generation,
        then one more to release those whose generation moved meanwhile."""
        by_generation = defaultdict(list)
        for key, generation in generations.items():
            by_generation[generation].append(key)
        finished = 0
        for generation, keys in by_generation.items():
            finished += (
                self.rows(keys)
                .filter(claim_token=token, generation=generation)
                .update(**fields, synced_generation=generation, claimed_until=None, claim_token="")
            )
        if finished < len(generations):
            self.rows(generations).filter(claim_token=token).update(
                claimed_until=None, claim_token=""
            )
        return finished

    def finish_each(self, done, token, **fields):
        """`finish` for several units in one UPDATE, each with fields of its own:
        `done` is {key: (generation, {field: value})}, `fields` are everyone's.
        The keys finished (those whose generation had not moved); the others are
        left as they were, still held by `token`."""
        if not done:
            return set()
        unmoved = Q()
        for key, (generation, _) in done.items():
            unmoved |= Q(**{self.key: key, "generation": generation})
        names = {name for _, own in done.values() for name in own}
        per_key = {
            name: Case(
                *(
                    When(**{self.key: key}, then=Value(own[name], output_field=self._field(name)))
                    for key, (_, own) in done.items()
                    if name in own
                ),
                default=F(name),
                output_field=self._field(name),
            )
            for name in names
        }
        count = (
            self.rows(done)
            .filter(unmoved, claim_token=token)
            .update(**per_key, **fields, synced_generation=F("generation"), claimed_until=None,
                    claim_token="")
        )  # fmt: skip
        if count == len(done):
            return set(done)
        return set(done) - set(
            self.rows(done).filter(claim_token=token).values_list(self.key, flat=True)
        )

    def _field(self, name):
        return self.model._meta.get_field(name)

    def release(self, key, token, **fields):
        """Give the lease back (writing `fields`), done or not."""
        self.holding(key, token).update(**fields, claimed_until=None, claim_token="")

    def due(self, rows=None, now=None):
        """Keys marked and not done, not refused, not leased, and with no message
        waiting (unless it has waited a whole lease: then it was probably lost)."""
        now = now or timezone.now()
        stale = now - timedelta(seconds=self.lease())
        rows = self.rows() if rows is None else rows
        return list(
            rows.filter(generation__gt=F("synced_generation"))
            .filter(generation__gt=F("refused_generation"))
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
            .filter(
                Q(queued_at__isnull=True)
                | Q(queued_at__lt=F("last_attempt_at"))
                | Q(queued_at__lt=stale)
            )
            .values_list(self.key, flat=True)
        )

    def sweep(self, rows=None, now=None):
        """Queue every unit `due` (a few queries, then one message per unit)."""
        return self.enqueue(self.due(rows, now))
