#!/usr/bin/env python3
"""Serve moto, the AWS emulator, handling one request at a time.

moto's own threaded server (moto_server) does not run DynamoDB transactions
atomically: TransactWriteItems checks its conditions and applies its writes
without a lock, and rolls back by restoring a copy of the whole table, which
can drop other requests' writes. The service relies on transactions for its
state changes (docs/behaviour.md "User changes"), so this launcher serves the same application as
moto_server behind one global lock: requests are still accepted concurrently,
but processed alone.

moto also snapshots every table a transaction touches (a deepcopy of the
whole table) so that it can roll back, and a cancelled transaction puts the
copy in the table's place. The copy has a stream of its own: a reader of the
table's stream (the local delivery of the changes table to
PublisherFunction, dev/stack) holds iterators of the old one, and misses
the changes that follow. Because requests are processed alone here, the
launcher snapshots only the items a transaction names and restores those in
the table itself, and drops the stream records of the writes it undoes.

moto writes every answer through its model-driven serializer, which walks
the answer's shape value by value: about 1.5 ms for each item a Query or Scan
returns, seconds for a 1 MB page, so that a page of a large fleet outlasted
the service's per-attempt timeout. This launcher writes the items of those
two answers as plain JSON instead (the DynamoDB JSON protocol is the
answer's own shape), a hundred times faster, the same JSON values.

moto sends an S3 EventBridge notification (a bucket with
EventBridgeConfiguration) to the rules of its event buses, and a rule may
target an SQS queue, but every event carries the same detail.object.sequencer,
"617f08299329d189". S3's sequencers grow from one event of a key to the next,
and whoever orders events (the task-log indexer, docs/behaviour.md "Task-log
index") compares them, so a delete after a create would look like a
duplicate. Here each S3 EventBridge event gets a sequencer of its own, 16
upper-case hex digits that grow with every event (the larger of the last one
plus one and the clock in nanoseconds, so they also grow across restarts),
compared as S3 documents: as strings, the shorter padded with zeros on the
right. The event's time needs no patch: moto keeps it in epoch seconds,
and writes it in EventBridge's ISO-8601 form into an SQS queue itself.
moto keeps a bucket's EventBridgeConfiguration but leaves it out of
GetBucketNotificationConfiguration's answer, where S3 writes it: the
task-log reconciliation reads it there (docs/behaviour.md
"Reconciliation"), so here the answer holds it.

A long poll (ReceiveMessage with WaitTimeSeconds) waits for a message inside
moto, and would hold the global lock for the whole wait, so that no message
could ever arrive: the wait releases the lock, and the poll takes it again to
read the queue.

An S3 write or delete (PutObject, DeleteObject, CopyObject, the end of a
multipart upload...) whose EventBridge event a rule sent to an SQS queue is
answered only once the message it became there is deleted, or after
MOTOSERVER_EVENT_HOLD seconds (2 unless set; 0 turns the hold off),
whichever comes first. The local stack stands that queue in for the Lambda
target of the task-log indexer's rule and drains it (dev/stack, "Local S3
event delivery"), so locally an uploaded log is indexed before its upload
returns, where a deployment takes the seconds EventBridge takes, unless
the queue holds more than the delivery applies in that time (the upload
then returns before its log is indexed, which follows in order). The hold
waits outside the global lock, sleeping until a delete wakes it, so that the
delivery can call back into the emulator meanwhile; a write whose event went to no queue (no EventBridge
notifications, or no rule with an SQS target, as in most tests) is answered
at once.

moto finds the service of every request among its modules by listing its
own folder and checking each entry for a directory, about 150 system calls
a request: more of the server's time than answering most requests took.
The list does not change while it runs, so here it is made once.

An event put on a bus (PutEvents) goes to each target of each rule it
matches through moto's input template, whose eight JSONPath expressions
(one for each field of the event) jsonpath_ng parses again for every event
and every target, building its parser's tables each time: 0.45 s of the
global lock per event and rule with an SQS target, so that ten events to
three watching queues took 13.6 s, the publisher's PutEvents timed out and
sent them again, and every other request waited. An expression parses to
the same tree every time, and nothing changes one after it is parsed, so
here each is parsed once: ten events to three queues take milliseconds.

Sending a message to an SQS queue (a rule's target, or SendMessage) reads
the queue's attributes, which count its messages three times, reading the
clock for each message and each count: 0.5 s a message to a queue that
holds 4,000 nobody reads (a watcher that lags, a rule whose queue is not
drained), so that a large report's events ran further behind with every
event. A receive does the same for every message it returns (to read the
queue's retention period), and a delete walks the whole queue twice: at
15,000 messages, 363 ms to receive and delete ten, so that a watcher fell
further behind a 20,000-machine report the more it had to catch up. Here
the counts, and the list of messages a receive takes from, read the clock
once, a receive reads the retention period alone, and a delete stops at the
message it deletes (a reader deletes what it received, near the front): the
same answers, at 15,000 messages about a hundred times faster.

A ListObjectsV2 with EncodingType=url answers its keys url-encoded, and S3
encodes StartAfter too; moto writes StartAfter back as it was given, so a
page that starts after a key holding a control character was XML no client
could read (the task-log search resumes after such keys). Here StartAfter is
encoded like the keys.

Usage: python3 dev/motoserver.py [--host 127.0.0.1] [--port 4566] [--quiet]
       python3 dev/motoserver.py --check | --installed

--port 0 picks a free port. Once listening, the server prints one line,
"motoserver listening on http://HOST:PORT", to stdout. SIGTERM and SIGINT stop it.

The pin and the guard. Every patch above replaces a private part of moto, so
this launcher runs only the moto that dev/moto-requirements.txt pins (make
deps, .ci/run and the README install from that file). Any other version is
refused at start with one line: the version found, the one needed, and how to
install it. Before patching, the launcher also checks that each function a
patch replaces or relies on still has the shape the patch expects (its
parameters, the attributes and calls the patch counts on), and refuses to
start naming each patch that no longer fits. --check runs both checks and
exits; --installed checks the version alone, without importing moto, and
exits 0 when the pinned moto is installed (make deps uses it).

The patches, and why each is still needed with moto 5.2.1. A patch is kept
only when correctness needs it, or when taking it out costs more than 30 s
of CI (a test that times out counts as correctness); docs/decisions.md
("Only the patches correctness needs") says how that was measured. Eleven
patches (read from moto's source, and where it says so tried: the patch
taken out, its test run):
- serialized (the global lock): needed. moto's DynamoDB backend takes no
  lock anywhere (DomainDispatcherApplication's lock guards only the creation
  of its per-service apps), and transact_write_items still checks, writes and
  rolls back without one. Without the lock (and the two patches that rest on
  it), dev/stack's TestMotoRunsTransactionsOneAtATime loses a plain write in
  every run.
- item_rollback (dynamodb_models.copy, transact_write_items): needed.
  transact_write_items still puts a copy in the place of every table a
  cancelled transaction touched. Without the patch, dev/run's
  TestEveryChangeBecomesOneEventWithASequenceThatNeverGoesBack missed 2 to
  12 of its 49 events in each of three runs.
- plain_item_pages (DynamoResult.execute_result): needed, for a test's
  deadline and for CI's time. Every answer still goes through the
  model-driven serializer. Without the patch, in make test (with the other
  patches for speed out too, load 10 to 15), dev/run's
  TestTheLocalStackAnswersTheListAndAStateQueryOfALargeFleet answered 504,
  its list outlasting SlavesFunction's timeout; run alone, its two tests
  of a large fleet took 73 s instead of 30 s.
- s3_event_sequencers (_send_event_bridge_message, Rule.send_to_targets):
  needed. The sequencer is still the constant "617f08299329d189"; without
  the patch, dev/stack's TestTheLogBucketsEventsReachTheHandlerInOrder...
  fails on it.
- long_polls_outside (Queue.wait_for_messages): needed as long as the global
  lock is: the wait still happens inside the request.
- event_hold (Queue.add_message, Queue.delete_message): needed for the hold,
  which moto does not have.
- modules_listed_once (backends.list_of_moto_modules): needed for CI's
  time. moto 5.2.1 still lists its folder on every request. Without the
  patch, the six packages of make test that load the emulator most took
  20 to 92 s longer in each of three pairs of runs (33 s the median; load
  4 to 10), and they are about half of moto's work in make test.
- event_bridge_configuration (S3Response.get_bucket_notification): needed.
  moto 5.2.1 still leaves EventBridgeConfiguration out of the answer.
- url_encoded_start_after (S3Response.list_objects_v2): needed. moto 5.2.1
  still writes StartAfter back as given.
- input_paths_parsed_once (jsonpath_ng.ext.parse, as
  EventTemplateParser.parse imports it): needed for CI's time. moto 5.2.1
  still parses the eight paths for every event and target. Without the
  patch, dev/run's TestEveryChangeBecomesOneEventWithASequenceThatNeverGoesBack
  took 51 s instead of 9 s (load 10 to 14), nearly all of it the emulator's
  CPU, and every S3 event of the other tests that a rule sends to a queue
  pays the same.
- queues_read_cheaply (Queue.messages, its three
  approximate_number_of_messages counts, Queue.delete_message and
  SQSBackend.is_message_valid_based_on_retention_period): needed for the
  local stack to be usable: without it the local watchers (make events)
  fall further behind a large report's events the longer it runs
  (BENCHMARKS.md, "Events behind a large report"). Message.visible and
  Message.delayed still read the clock for every message, the retention
  check still reads every attribute, and delete_message still walks the
  queue twice.

Upgrading moto. 1. Change the version in dev/moto-requirements.txt and run
make deps. 2. Run python3 dev/motoserver.py --check: each patch it names
must be rewritten for the new moto's source (or dropped, if the new moto
fixes what it works around; then remove its paragraph and its entry in the
list above, lower the count, and remove its entry in SHAPES). 3. Run the integration tests that exercise the patches:
  go test -tags integration -count=1 ./dev/stack/ ./shared/dynamo/ ./shared/logindex/
  go test -tags integration -count=1 ./dev/run/
  make test-resilience   (the global lock and item_rollback: concurrent
                          transactions; see docs/decisions.md)
"""

import argparse
import base64
import copy
import functools
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import os
import signal
import sys
import threading
import time
import types
import urllib.parse

REQUIREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "moto-requirements.txt")
INSTALL = "python3 -m pip install -r dev/moto-requirements.txt (or make deps)"


def pinned_version():
    """The moto version dev/moto-requirements.txt pins (moto[server]==X)."""
    with open(REQUIREMENTS) as f:
        for line in f:
            name, sep, version = line.split("#")[0].strip().partition("==")
            if sep and name.split("[")[0].strip() == "moto":
                return version.strip()
    sys.exit(f"motoserver: {REQUIREMENTS} pins no moto version (a line moto[server]==X)")


def version_refusal():
    """The one line that refuses the installed moto, or None when it is the pinned one."""
    need = pinned_version()
    try:
        found = "moto " + importlib.metadata.version("moto")
    except importlib.metadata.PackageNotFoundError:
        found = "no moto"
    if found != "moto " + need:
        return f"motoserver: found {found}, needs moto {need} (dev/moto-requirements.txt); install it with: {INSTALL}"
    return None


# Checked before moto is imported: another version may not even import the
# same modules, and --installed must answer without the seconds an import takes.
REFUSAL = version_refusal()
if REFUSAL is not None:
    sys.exit(REFUSAL)
if sys.argv[1:] == ["--installed"]:
    sys.exit(0 if all(importlib.util.find_spec(m) for m in ("flask", "werkzeug")) else 1)

try:
    import moto.backends as moto_backends
    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.responses import DynamoResult
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import StreamShard, Table
    from moto.events.models import Rule
    from moto.events.utils import EventTemplateParser
    import jsonpath_ng.ext as jsonpath_ext
    from moto.s3 import models as s3_models, notifications as s3_notifications
    from moto.s3.responses import S3Response
    from moto.sqs import models as sqs_models
    from moto.sqs.models import Message, Queue, SQSBackend
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server
except ImportError as err:
    sys.exit(f"motoserver: {err}; install moto with: {INSTALL}")


def params(func):
    return list(inspect.signature(func).parameters)


def calls(func, text):
    return text in inspect.getsource(func)


def sets(cls, attribute):
    return calls(cls.__init__, f"self.{attribute} =")


QUEUE_COUNTS = ("messages", "approximate_number_of_messages", "approximate_number_of_messages_delayed",
                "approximate_number_of_messages_not_visible")

# SHAPES: for each patch, what it expects of moto, and a check of that on
# moto's own functions (run before any patch replaces them).
SHAPES = [
    ("serialized", "DomainDispatcherApplication(create_app), a WSGI app",
     lambda: params(DomainDispatcherApplication.__init__) == ["self", "create_app"]
     and callable(DomainDispatcherApplication)),
    ("item_rollback", "moto.dynamodb.models imports the copy module, and "
     "DynamoDBBackend.transact_write_items(self, transact_items) backs tables up with copy.deepcopy",
     lambda: dynamodb_models.copy is copy
     and params(dynamodb_models.DynamoDBBackend.transact_write_items) == ["self", "transact_items"]
     and calls(dynamodb_models.DynamoDBBackend.transact_write_items, "copy.deepcopy(")),
    ("item_rollback", "Table.get_item(self, hash_key, range_key, ...), Table.delete_item(self, hash_key, range_key), "
     "a Table's items, hash_key_attr, range_key_attr and stream_shard, and a StreamShard's items",
     lambda: params(Table.get_item)[:3] == ["self", "hash_key", "range_key"]
     and params(Table.delete_item) == ["self", "hash_key", "range_key"]
     and all(sets(Table, a) for a in ("items", "hash_key_attr", "range_key_attr"))
     and calls(Table.__init__, "self.stream_shard:") and calls(StreamShard.__init__, "self.items:")),
    ("plain_item_pages", "DynamoResult(result), its result, and DynamoResult.execute_result(self, context)",
     lambda: params(DynamoResult.__init__) == ["self", "result"]
     and params(DynamoResult.execute_result) == ["self", "context"]
     and "result" in params(DynamoResult.__mro__[1].__init__)),
    ("s3_event_sequencers", "s3.notifications._send_event_bridge_message(account_id, bucket, event_name, key) "
     "writing detail.object.sequencer",
     lambda: params(s3_notifications._send_event_bridge_message) == ["account_id", "bucket", "event_name", "key"]
     and calls(s3_notifications._send_event_bridge_message, '"sequencer"')),
    ("s3_event_sequencers", "Rule.send_to_targets(self, original_event, transform_input), a Rule's event_pattern and targets",
     lambda: params(Rule.send_to_targets)[:3] == ["self", "original_event", "transform_input"]
     and all(sets(Rule, a) for a in ("name", "event_pattern", "targets"))),
    ("long_polls_outside", "Queue.wait_for_messages(self, timeout)",
     lambda: params(Queue.wait_for_messages) == ["self", "timeout"]),
    ("event_hold", "Queue.add_message(self, message), Queue.delete_message(self, receipt_handle) recording "
     "the receipt handles it deletes in deleted_messages, a Message's all_receipt_handles",
     lambda: params(Queue.add_message) == ["self", "message"]
     and params(Queue.delete_message) == ["self", "receipt_handle"]
     and calls(Queue.delete_message, "self.deleted_messages")
     and isinstance(getattr(Message, "all_receipt_handles", None), property)),
    ("event_bridge_configuration", "S3Response.get_bucket_notification(self) answering (status, headers, body), "
     "and a notification configuration's event_bridge",
     lambda: params(S3Response.get_bucket_notification) == ["self"]
     and calls(S3Response.get_bucket_notification, "get_bucket_notification_configuration(")
     and "event_bridge" in inspect.getsource(s3_models)),
    ("modules_listed_once", "moto.backends.list_of_moto_modules() listing moto's folder, which "
     "DomainDispatcherApplication.get_backend_for_host(self, host) calls through its module",
     lambda: params(moto_backends.list_of_moto_modules) == []
     and calls(moto_backends.list_of_moto_modules, "os.listdir(")
     and calls(DomainDispatcherApplication.get_backend_for_host, "backends.list_of_moto_modules()")),
    ("input_paths_parsed_once", "EventTemplateParser.parse(input_template, input_paths_map, event) parsing each "
     "path with jsonpath_ng.ext.parse(path, debug=False), which it imports when called",
     lambda: params(EventTemplateParser.parse) == ["input_template", "input_paths_map", "event"]
     and calls(EventTemplateParser.parse, "from jsonpath_ng.ext import parse")
     and params(jsonpath_ext.parse) == ["path", "debug"]),
    ("queues_read_cheaply", "a Queue's _messages, deleted_messages and pending_messages, its messages and "
     "approximate_number_of_messages(_delayed, _not_visible) properties, a Message's visible and delayed comparing "
     "unix_time_millis() with its visible_at and delayed_until and its receipt_handle and _old_receipt_handles, "
     "Queue.delete_message(self, receipt_handle) raising ReceiptHandleIsInvalid, a queue's MessageRetentionPeriod "
     "kept as its message_retention_period, and "
     "SQSBackend.is_message_valid_based_on_retention_period(self, queue_name, message) reading MessageRetentionPeriod",
     lambda: all(isinstance(getattr(Queue, n, None), property) for n in QUEUE_COUNTS)
     and all(calls(Queue.__init__, f"self.{a}:") for a in ("_messages", "deleted_messages", "_pending_messages"))
     and calls(Queue.__init__, '"MessageRetentionPeriod"')
     and calls(Queue._set_attributes, "setattr(self, camelcase_to_underscores(key), value)")
     and calls(Queue.messages.fget, "message.visible and not message.delayed")
     and calls(Message.visible.fget, "unix_time_millis()") and calls(Message.visible.fget, "self.visible_at")
     and calls(Message.delayed.fget, "unix_time_millis()") and calls(Message.delayed.fget, "self.delayed_until")
     and calls(Message.__init__, "self._old_receipt_handles") and calls(Message.all_receipt_handles.fget,
                                                                        "[self.receipt_handle] + self._old_receipt_handles")
     and params(Queue.delete_message) == ["self", "receipt_handle"]
     and calls(Queue.delete_message, "raise ReceiptHandleIsInvalid()")
     and params(SQSBackend.is_message_valid_based_on_retention_period) == ["self", "queue_name", "message"]
     and calls(SQSBackend.is_message_valid_based_on_retention_period, "MessageRetentionPeriod")
     and callable(sqs_models.unix_time_millis) and callable(sqs_models.unix_time)),
    ("url_encoded_start_after", "S3Response.list_objects_v2(self) serializing through self.serialized, "
     "its result holding StartAfter",
     lambda: params(S3Response.list_objects_v2) == ["self"]
     and calls(S3Response.list_objects_v2, "self.serialized(") and calls(S3Response.list_objects_v2, "StartAfter")),
]


def misfits():
    """One line for each patch whose moto functions no longer have the shape it expects."""
    lines = []
    for patch, expects, check in SHAPES:
        try:
            ok = check()
        except Exception as err:  # a function gone, or its source unreadable
            ok, expects = False, f"{expects} ({type(err).__name__}: {err})"
        if not ok:
            lines.append(f"motoserver: the patch {patch} does not fit moto {pinned_version()}: it expects {expects}")
    return lines


def serialized(app, lock, hold):
    """Wrap a WSGI app so that one request at a time runs it, under lock.

    The response body is materialized inside the lock: a WSGI app may do its
    work lazily while the server iterates the body, after the call returns.
    The answer then waits, outside the lock, for the queues hold names.
    """

    def wrapped(environ, start_response):
        try:
            with lock:
                body = app(environ, start_response)
                try:
                    chunks = list(body)
                finally:
                    close = getattr(body, "close", None)
                    if close is not None:
                        close()
        finally:
            hold.wait()
        return chunks

    return wrapped


def long_polls_outside(lock):
    """Make a long poll wait for its messages without the global lock.

    receive_message waits on the queue's condition, a second at a time,
    while its request holds the lock; nothing could send the message it
    waits for. The lock is released for the wait and taken again after it,
    before receive_message reads the queue again.
    """
    wait = Queue.wait_for_messages

    def wait_for_messages(self, timeout):
        lock.release()
        try:
            wait(self, timeout)
        finally:
            lock.acquire()

    Queue.wait_for_messages = wait_for_messages


class EventHold:
    """The SQS messages the current request's S3 events became, and the wait.

    The patched rule marks the request's thread while it sends an S3 event
    to its targets, and the patched queue records each message it adds
    meanwhile (both in the request's thread, under the lock). wait holds the
    request's answer until each of those messages is deleted, that is
    applied by the delivery, at most timeout seconds.
    It sleeps on a condition of the global lock, which each delete notifies:
    writers that polled the queues instead took the lock hundreds of times a
    second each, and under load left the delivery almost none of it.
    """

    def __init__(self, lock, timeout):
        self.changed = threading.Condition(lock)
        self.timeout = timeout
        self.local = threading.local()

    def sending(self, on):
        self.local.sending = on and self.timeout > 0

    def added(self, queue, message):
        if getattr(self.local, "sending", False):
            if getattr(self.local, "messages", None) is None:
                self.local.messages = []
            self.local.messages.append((queue, message))

    def wait(self):
        messages = getattr(self.local, "messages", None)
        if not messages:
            return
        self.local.messages = None
        with self.changed:
            self.changed.wait_for(lambda: all(applied(q, m) for q, m in messages), self.timeout)


def applied(queue, message):
    """Whether queue deleted message (moto records the receipt handles of
    what it deletes, None among them: that of a message not yet received)."""
    return any(h is not None and h in queue.deleted_messages for h in message.all_receipt_handles)


def event_hold(hold):
    """Have SQS queues tell hold of the messages they add and delete."""
    add, delete = Queue.add_message, Queue.delete_message

    def add_message(self, message):
        add(self, message)
        hold.added(self, message)

    def delete_message(self, receipt_handle):
        delete(self, receipt_handle)
        hold.changed.notify_all()

    Queue.add_message = add_message
    Queue.delete_message = delete_message


def s3_event_sequencers(hold):
    """Give each S3 EventBridge event a sequencer of its own, and hold its answer.

    _send_event_bridge_message builds one event and hands the same dict to
    every rule of every bus; the sequencer is drawn once for it, and each
    rule stamps it before sending, with hold told that what the queues add
    meanwhile is this request's (EventHold). moto swallows any error of a
    send; the rule prints it first.
    """
    state = {"last": 0}
    local = threading.local()
    draw = threading.Lock()
    send = s3_notifications._send_event_bridge_message

    def _send_event_bridge_message(account_id, bucket, event_name, key):
        with draw:
            state["last"] = max(state["last"] + 1, time.time_ns())
            local.sequencer = f"{state['last']:016X}"
        try:
            send(account_id, bucket, event_name, key)
        finally:
            local.sequencer = None

    s3_notifications._send_event_bridge_message = _send_event_bridge_message
    to_targets = Rule.send_to_targets

    def send_to_targets(self, event, transform_input=True):
        sequencer = getattr(local, "sequencer", None)
        if sequencer is None or event.get("source") != "aws.s3":
            return to_targets(self, event, transform_input)
        event["detail"]["object"]["sequencer"] = sequencer
        hold.sending(True)
        try:
            return to_targets(self, event, transform_input)
        except Exception as err:
            # moto's caller swallows it: say which event went nowhere.
            detail = event["detail"]
            print(f"motoserver: S3 event {event.get('detail-type')} of s3://{detail['bucket']['name']}/"
                  f"{detail['object']['key']!r} not sent to rule {self.name}: {type(err).__name__}: {err}",
                  file=sys.stderr, flush=True)
            raise
        finally:
            hold.sending(False)

    Rule.send_to_targets = send_to_targets


def event_bridge_configuration():
    """Answer GetBucketNotificationConfiguration with EventBridgeConfiguration when it is on."""
    get = S3Response.get_bucket_notification

    def get_bucket_notification(self):
        config = self.backend.get_bucket_notification_configuration(self.bucket_name)
        if config is None or config.event_bridge is None:
            return get(self)
        status, headers, body = get(self)
        if isinstance(body, bytes):
            body = body.decode()
        marker = "</NotificationConfiguration>"
        if marker in body:
            body = body.replace(marker, "<EventBridgeConfiguration></EventBridgeConfiguration>" + marker)
        else:
            body = body.replace("<NotificationConfiguration", "<NotificationConfiguration", 1).replace(
                "/>", "><EventBridgeConfiguration></EventBridgeConfiguration></NotificationConfiguration>", 1)
        return status, headers, body

    S3Response.get_bucket_notification = get_bucket_notification


def item_rollback():
    """Make DynamoDB transactions roll back item by item, not table by table.

    transact_write_items deep-copies each table it touches before writing and
    puts the copies in the tables' place on failure, streams and all, so a
    reader of a stream lost it (see above). Here tables are not copied (the
    rollback then puts back the very same table), and the wrapper saves and
    restores the items the transaction names, and the records of the tables'
    streams it added. Only valid while requests run one at a time, as
    serialized() ensures.
    """

    def deepcopy(value, memo=None):
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    dynamodb_models.copy = types.SimpleNamespace(deepcopy=deepcopy)
    original = dynamodb_models.DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        saved, streams = [], []
        for entry in transact_items:
            for op in entry.values():
                table = self.tables.get(op.get("TableName"))
                if table is None:
                    continue
                key = op.get("Item") or op.get("Key") or {}
                try:
                    h = DynamoType(key[table.hash_key_attr])
                    r = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
                except (KeyError, TypeError):
                    continue  # malformed: moto rejects it before writing anything
                saved.append((table, h, r, copy.deepcopy(table.get_item(h, r))))
                if table.stream_shard is not None:
                    streams.append((table.stream_shard, len(table.stream_shard.items)))
        try:
            return original(self, transact_items)
        except Exception:
            for table, h, r, item in reversed(saved):
                if item is None:
                    table.delete_item(h, r)
                elif r is None:
                    table.items[h] = item
                else:
                    table.items[h][r] = item
            # A stream shows committed writes only: drop the records of the
            # writes undone, and of the undoing.
            for shard, length in streams:
                del shard.items[length:]
            raise

    dynamodb_models.DynamoDBBackend.transact_write_items = transact_write_items


def plain_item_pages():
    """Write the items of Query and Scan answers as plain JSON.

    The serializer still writes the answer without its items, so status and
    headers are its own; the items, DynamoDB JSON already ({"S": ...}, binary
    values as bytes), are then put back by json.dumps, bytes in base64 as
    the serializer writes them.
    """
    original = DynamoResult.execute_result

    def execute_result(self, context):
        result = self.result
        if context.operation_model.name not in ("Query", "Scan") or "Items" not in result:
            return original(self, context)
        status, headers, body = original(DynamoResult({k: v for k, v in result.items() if k != "Items"}), context)
        if status != 200:
            return status, headers, body
        return status, headers, json.dumps(result, separators=(",", ":"), default=binary)

    DynamoResult.execute_result = execute_result


def modules_listed_once():
    """List moto's service modules once, not for every request (see above)."""
    modules = tuple(moto_backends.list_of_moto_modules())
    moto_backends.list_of_moto_modules = lambda: modules


def url_encoded_start_after():
    """Encode ListObjectsV2's StartAfter as its keys when asked to (see above)."""
    original = S3Response.list_objects_v2

    def list_objects_v2(self):
        if self.querystring.get("encoding-type", [None])[0] == "url":
            serialized = self.serialized

            def encoded(action_result):
                result = action_result.result
                if isinstance(result, dict) and result.get("StartAfter"):
                    result["StartAfter"] = urllib.parse.quote(result["StartAfter"])
                return serialized(action_result)

            self.serialized = encoded
        return original(self)

    S3Response.list_objects_v2 = list_objects_v2


def input_paths_parsed_once():
    """Parse each JSONPath expression of an event's input template once (see above).

    EventTemplateParser.parse imports jsonpath_ng.ext.parse when it runs,
    so it finds the cached one here.
    """
    jsonpath_ext.parse = functools.lru_cache(maxsize=256)(jsonpath_ext.parse)


def queues_read_cheaply():
    """Count, receive and delete a queue's messages without walking it more than once (see above).

    A message is visible once the clock is past its visible_at, and delayed
    while the clock is before its delayed_until, as Message says. A receipt
    handle belongs to one message (its current one or an old one), and a
    queue's retention period is its message_retention_period attribute,
    which get_queue_attributes reads among all the others.
    """

    def messages(self):
        now = sqs_models.unix_time_millis()
        return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]

    def delayed(self):
        now = sqs_models.unix_time_millis()
        return sum(1 for m in self._messages if now < m.delayed_until)

    def not_visible(self):
        now = sqs_models.unix_time_millis()
        return sum(1 for m in self._messages if not now > m.visible_at)

    def delete_message(self, receipt_handle):
        if receipt_handle in self.deleted_messages:
            return  # deleted before: SQS accepts it again
        for i, m in enumerate(self._messages):
            if m.receipt_handle == receipt_handle or receipt_handle in m._old_receipt_handles:
                del self._messages[i]
                self._pending_messages.discard(m)
                self.deleted_messages.update(m.all_receipt_handles)
                return
        raise sqs_models.ReceiptHandleIsInvalid()

    def retained(self, queue_name, message):
        period = int(self.get_queue(queue_name).message_retention_period)
        return period + message.sent_timestamp / 1000 > sqs_models.unix_time()

    Queue.messages = property(messages)
    Queue.approximate_number_of_messages = property(lambda self: len(self.messages))
    Queue.approximate_number_of_messages_delayed = property(delayed)
    Queue.approximate_number_of_messages_not_visible = property(not_visible)
    Queue.delete_message = delete_message
    SQSBackend.is_message_valid_based_on_retention_period = retained


def binary(value):
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"no JSON form for {type(value).__name__}")


def stop(signum, frame):
    sys.exit(0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=4566, help="port to bind, 0 for a free one (default 4566)")
    parser.add_argument("--quiet", action="store_true", help="do not log each request")
    parser.add_argument("--check", action="store_true",
                        help="check the moto version and that every patch fits it, then exit")
    parser.add_argument("--installed", action="store_true",
                        help="exit 0 when the pinned moto is installed (checked before this parser runs)")
    args = parser.parse_args(argv)

    lines = misfits()
    if lines:
        print("\n".join(lines) + "\nmotoserver: see \"Upgrading moto\" at the top of dev/motoserver.py",
              file=sys.stderr)
        sys.exit(1)
    if args.check:
        print(f"motoserver: moto {pinned_version()}, every patch fits")
        return

    if args.quiet:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    # make_server is what werkzeug's run_simple(host, port, app, threaded=True)
    # builds, minus the reloader; unlike run_simple it tells which port it bound.
    item_rollback()
    event_bridge_configuration()
    plain_item_pages()
    url_encoded_start_after()
    modules_listed_once()
    input_paths_parsed_once()
    queues_read_cheaply()
    lock = threading.Lock()
    hold = EventHold(lock, float(os.environ.get("MOTOSERVER_EVENT_HOLD", "2")))
    long_polls_outside(lock)
    event_hold(hold)
    s3_event_sequencers(hold)
    app = serialized(DomainDispatcherApplication(create_backend_app), lock, hold)
    server = make_server(args.host, args.port, app, threaded=True)
    port = server.socket.getsockname()[1]
    # moto builds some resource URLs (SQS queues, for one) from MOTO_PORT.
    os.environ.setdefault("MOTO_PORT", str(port))
    print(f"motoserver listening on http://{args.host}:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
