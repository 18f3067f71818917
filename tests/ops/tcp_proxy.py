"""A TCP proxy that can drop every connection and refuse new ones, then come
back on the same port: what a PostgreSQL restart looks like to a client.
Used by tests/ops/test_database_outage.py and bench/load_portal.py."""

import contextlib
import socket
import threading


class Proxy:
    """Forwards a local port to PostgreSQL until stopped; can start again."""

    def __init__(self, target):
        self.target = target
        self.port = None
        self.server = None
        self.connections = []

    def start(self):
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", self.port or 0))
        self.port = self.server.getsockname()[1]
        self.server.listen(64)
        threading.Thread(target=self._accept, args=(self.server,), daemon=True).start()

    def stop(self):
        # shutdown() wakes the thread blocked in accept(); close() alone would not.
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        for conn in self.connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self.connections = []

    def _accept(self, server):
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.connections += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
