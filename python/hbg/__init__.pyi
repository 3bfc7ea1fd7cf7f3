# SPDX-License-Identifier: MIT
# Type stubs of the hbg package (its docstrings say what each call does).
import os
from types import TracebackType
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple, Type, Union

import numpy as np
import numpy.typing as npt

__version__: str
MAX_TASK_TENSORS: int
MAX_TASK_SCALARS: int
MAX_TASK_DEPS: int
MAX_HOST_THREADS: int

_Shape = Union[int, Sequence[int]]
_KernelRef = Union[str, int, "Kernel", None]
_TaskIds = Union[int, Iterable[int]]
_Arrays = Sequence[np.ndarray]

def library_version() -> str: ...
def connect(
    socket: Union[str, os.PathLike[str], None] = ...,
    *,
    heap: Optional[int] = ...,
    window: Optional[int] = ...,
    stall_timeout: Optional[float] = ...,
    host_threads: int = ...,
    name: Optional[str] = ...,
) -> Client: ...

class GraphError(RuntimeError):
    graph: Optional[int]
    task: Optional[int]
    kernel: str
    message: str
    errno: int

# A struct sequence (as os.stat_result): a tuple whose items are also
# named; no _fields or _asdict() as a NamedTuple has.
class Kernel(Tuple[Any, ...]):
    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> Optional[str]: ...
    @property
    def module(self) -> Optional[str]: ...
    @property
    def tensors(self) -> Tuple[Tuple[str, str], ...]: ...
    @property
    def scalars(self) -> Tuple[Tuple[str, str], ...]: ...
    @property
    def length(self) -> str: ...
    @property
    def length_rule(self) -> Optional[str]: ...
    @property
    def in_place(self) -> bool: ...
    @property
    def splittable(self) -> bool: ...

class Handle:
    @property
    def id(self) -> int: ...
    def wait(self, timeout: Optional[float] = ...) -> None: ...
    def done(self) -> bool: ...
    def cancel(self) -> bool: ...

class Graph:
    def add(
        self,
        kernel: _KernelRef,
        *arrays: np.ndarray,
        scalars: Sequence[Union[int, float]] = ...,
        after: _TaskIds = ...,
        blocks: Optional[int] = ...,
    ) -> int: ...
    def add_host(
        self,
        fn: Callable[[], Any],
        reads: _Arrays = ...,
        writes: _Arrays = ...,
        after: _TaskIds = ...,
    ) -> int: ...
    def submit(self) -> Handle: ...
    def run(self, timeout: Optional[float] = ...) -> None: ...
    def __len__(self) -> int: ...

class Recording:
    @property
    def graph(self) -> Graph: ...
    @property
    def id(self) -> Optional[int]: ...
    def launch(self) -> Handle: ...
    def __enter__(self) -> Recording: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Client:
    def __init__(
        self,
        socket: Union[str, os.PathLike[str], None] = ...,
        *,
        heap: Optional[int] = ...,
        window: Optional[int] = ...,
        stall_timeout: Optional[float] = ...,
        host_threads: int = ...,
        name: Optional[str] = ...,
    ) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def host_threads(self) -> int: ...
    def close(self) -> None: ...
    def empty(self, shape: _Shape, dtype: npt.DTypeLike = ...) -> np.ndarray: ...
    def zeros(self, shape: _Shape, dtype: npt.DTypeLike = ...) -> np.ndarray: ...
    def asarray(self, array: npt.ArrayLike, dtype: npt.DTypeLike = ...) -> np.ndarray: ...
    def graph(self) -> Graph: ...
    def record(self) -> Recording: ...
    def kernels(self) -> list[Kernel]: ...
    def __enter__(self) -> Client: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None: ...
