"""A loopback TCP proxy the tests start, cut and stall, standing between a client and a server.

`cut()` closes every connection through it (as an outage or a server restart
would, seen from the client); the proxy keeps accepting new ones afterwards.
`stall()` keeps the connections open but forwards nothing until `resume()`;
`stall_answers()` forwards what clients send but holds what the server answers.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._flowing = threading.Event()
        self._flowing.set()
        self._answering = threading.Event()
        self._answering.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)  # an idle pooled connection stays up, as with no proxy
            with self._lock:
                self._sockets += [client, upstream]
            pumps = [2]  # the pair is closed when both of its pumps are done
            for a, b, gates in (
                (client, upstream, (self._flowing,)),
                (upstream, client, (self._flowing, self._answering)),
            ):
                threading.Thread(target=self._pump, args=(a, b, pumps, gates), daemon=True).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        pumps: list[int],
        gates: tuple[threading.Event, ...],
    ) -> None:
        try:
            while data := source.recv(65536):
                for gate in gates:
                    gate.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            # shut down and closed under the lock, closed only once no thread uses them:
            # a descriptor closed while another thread still names it may be reused by
            # a new connection meanwhile, which that thread would then cut
            with self._lock:
                for s in (source, sink):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)
                pumps[0] -= 1
                if pumps[0] == 0:
                    self._sockets = [s for s in self._sockets if s not in (source, sink)]
                    source.close()
                    sink.close()

    def stall(self) -> None:
        self._flowing.clear()

    def stall_answers(self) -> None:
        self._answering.clear()

    def resume(self) -> None:
        self._flowing.set()
        self._answering.set()

    def cut(self) -> None:
        """Drop every connection through the proxy (their threads then close them)."""
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()
