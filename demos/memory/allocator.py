"""A model of PyTorch's CUDA caching allocator: 512-byte rounding, small/large pools, best-fit reuse, splitting.

Constants follow c10/cuda/CUDACachingAllocator.cpp: requests round up to 512 bytes; requests up to 1 MiB come from
the small pool (2 MiB segments), larger ones from the large pool (20 MiB segments below 10 MiB, else rounded to
2 MiB). A free block is reused best-fit within its pool and split when the remainder is big enough (>= 512 B in the
small pool, > 1 MiB in the large pool); freed blocks merge with free neighbours; empty_cache() returns segments
with no allocated block. With expandable_segments each pool is one virtual segment that grows by pages
(2 MiB small, 20 MiB large); pages with nothing allocated can be unmapped, so holes stop pinning memory.
"""

from dataclasses import dataclass, field

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
MIN_BLOCK = 512
SMALL_SIZE = 1 * MiB
SMALL_BUFFER = 2 * MiB
LARGE_BUFFER = 20 * MiB
MIN_LARGE_ALLOC = 10 * MiB
ROUND_LARGE = 2 * MiB


class OutOfMemory(Exception):
    """The modelled device ran out of memory; the message mimics torch.OutOfMemoryError's."""


def round_size(nbytes: int) -> int:
    """Bytes the allocator hands out for a request: at least 512, a multiple of 512."""
    return MIN_BLOCK if nbytes < MIN_BLOCK else -(-nbytes // MIN_BLOCK) * MIN_BLOCK


def segment_size(size: int) -> int:
    """Bytes cudaMalloc'd for a new segment that must hold a block of `size` (already rounded)."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


def is_small(size: int) -> bool:
    return size <= SMALL_SIZE


def fmt_bytes(n: float) -> str:
    """Binary units, labelled as such: 1536 -> '1.50 KiB'."""
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def torch_size(n: int) -> str:
    """A size as torch's OOM message writes it (c10's format_size): up to 1024 in bytes, then KiB up to 1 MiB, MiB
    up to 1 GiB, else GiB, with two decimals."""
    if n <= KiB:
        return f"{n} bytes"
    for unit, scale in (("KiB", KiB), ("MiB", MiB)):
        if n <= scale * KiB:
            return f"{n / scale:.2f} {unit}"
    return f"{n / GiB:.2f} GiB"


# torch's CUDA OOM message, c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch at eb42ad6, the TORCH_CHECK_WITH
# in DeviceCachingAllocator::malloc; the process clause from reportProcessMemoryInfo). One clause per process NVML
# lists on the GPU ("Process <pid> has ..." for others); no CUDA-graph pools and no memory fraction here.
OOM_FORMAT = ("CUDA out of memory. Tried to allocate {alloc}. GPU 0 has a total capacity of {total} of which {free} "
              "is free. Including non-PyTorch memory, this process has {process} memory in use. Of the allocated "
              "memory {allocated} is allocated by PyTorch, and {cached} is reserved by PyTorch but unallocated. If "
              "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
              "to avoid fragmentation.  See documentation for Memory Management  "
              "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)")


@dataclass
class Block:
    offset: int
    size: int
    owner: str | None = None  # the name of the tensor living here; None = free (cached)


@dataclass
class Segment:
    ident: int
    small: bool
    size: int  # virtual size (for a classic segment: what cudaMalloc returned)
    blocks: list[Block] = field(default_factory=list)
    unmapped: set[int] = field(default_factory=set)  # page indices released (expandable segments only)
    page: int = 0  # page size for expandable segments; 0 for a classic segment

    def mapped_bytes(self) -> int:
        return self.size - len(self.unmapped) * self.page if self.page else self.size


@dataclass(frozen=True)
class BlockView:
    segment: int
    small: bool
    offset: int
    size: int
    owner: str | None
    mapped: bool = True  # False: virtual addresses of an expandable segment with no physical pages behind them


def _views(s: Segment, b: Block):
    """One view of a block, or, for a free block over unmapped pages, one view per mapped/unmapped run."""
    if b.owner or not s.page or not s.unmapped:
        yield BlockView(s.ident, s.small, b.offset, b.size, b.owner)
        return
    start, end = b.offset, b.offset + b.size
    while start < end:
        mapped = start // s.page not in s.unmapped
        stop = min(end, (start // s.page + 1) * s.page)
        while stop < end and (stop // s.page not in s.unmapped) == mapped:
            stop = min(end, stop + s.page)
        yield BlockView(s.ident, s.small, start, stop - start, None, mapped)
        start = stop


class CachingAllocator:
    """Allocated = bytes in blocks handed out; reserved = bytes held from the device (segments)."""

    def __init__(self, capacity: int | None = None, expandable: bool = False):
        self.capacity = capacity
        self.expandable = expandable
        self.segments: list[Segment] = []
        self.where: dict[str, tuple[Segment, Block]] = {}
        self.peak_allocated = 0
        self.peak_reserved = 0
        self._next_segment = 0
        self.allocated = 0  # kept as a running sum: replaying thousands of events must stay fast
        self._reserved: int | None = 0

    # -- statistics ------------------------------------------------------------------------------------------

    @property
    def reserved(self) -> int:
        if self._reserved is None:  # recomputed only after segments or mappings changed
            self._reserved = sum(s.mapped_bytes() for s in self.segments)
        return self._reserved

    def blocks(self) -> tuple[BlockView, ...]:
        """Every block of every segment, in address order (the picture of the cache); a free block of an
        expandable segment is split into its mapped and unmapped runs of pages."""
        return tuple(view for s in self.segments for b in s.blocks for view in _views(s, b))

    # -- malloc / free ---------------------------------------------------------------------------------------
    def malloc(self, owner: str, nbytes: int) -> int:
        """Give `owner` a block for nbytes; return the block's size (what memory_allocated grows by)."""
        if owner in self.where:
            raise ValueError(f"{owner} is already allocated")
        size = round_size(nbytes)
        found = self._best_fit(size) or self._new_space(size, nbytes)
        segment, block = found
        self._split(segment, block, size)
        block.owner = owner
        self.where[owner] = (segment, block)
        self.allocated += block.size
        if segment.page:
            self._map_pages(segment, block, nbytes)
        self._update_peaks()
        return block.size

    def free(self, owner: str) -> int:
        """Return owner's block to the cache (not to the device); merge with free neighbours."""
        segment, block = self.where.pop(owner)
        self.allocated -= block.size
        block.owner = None
        self._merge(segment)
        return block.size

    def empty_cache(self) -> int:
        """Release cached memory to the device; return how many bytes reserved dropped by."""
        before = self.reserved
        self._reserved = None
        if self.expandable:
            for segment in self.segments:
                self._unmap_free_pages(segment)
        else:
            self.segments = [s for s in self.segments if any(b.owner for b in s.blocks)]
        return before - self.reserved

    # -- internals -------------------------------------------------------------------------------------------
    def _best_fit(self, size: int):
        """The smallest free block of the pool that holds size (ties: lowest segment, then lowest address)."""
        small = is_small(size)
        best = None
        for s in self.segments:
            if s.small != small:
                continue
            for b in s.blocks:
                if b.owner is None and b.size >= size and (best is None or b.size < best[1].size):
                    best = (s, b)
                    if b.size == size:
                        return best
        return best

    def _new_space(self, size: int, nbytes: int):
        if self.expandable:
            return self._grow(size, nbytes)
        grant = segment_size(size)
        if not self._room_for(grant):
            self.empty_cache()  # the real allocator frees cached segments and retries before giving up
            if not self._room_for(grant):
                raise OutOfMemory(self.oom_message(nbytes))
        segment = Segment(self._next_segment, is_small(size), grant, [Block(0, grant)])
        self._next_segment += 1
        self.segments.append(segment)
        self._reserved = None
        return segment, segment.blocks[0]

    def _grow(self, size: int, nbytes: int):
        """Extend the pool's one virtual segment at its end; the new pages are mapped when used."""
        small = is_small(size)
        segment = next((s for s in self.segments if s.small == small), None)
        if segment is None:
            page = SMALL_BUFFER if small else LARGE_BUFFER
            segment = Segment(self._next_segment, small, 0, [], set(), page)
            self._next_segment += 1
            self.segments.append(segment)
        tail = segment.blocks[-1] if segment.blocks and segment.blocks[-1].owner is None else None
        extra = -(-(size - (tail.size if tail else 0)) // segment.page) * segment.page
        first_new = segment.size // segment.page
        self._reserved = None
        segment.size += extra
        segment.unmapped.update(range(first_new, first_new + extra // segment.page))
        if tail:
            tail.size += extra
        else:
            tail = Block(segment.size - extra, extra)
            segment.blocks.append(tail)
        return segment, tail

    def _map_pages(self, segment: Segment, block: Block, nbytes: int) -> None:
        """Map the pages under a new block; free pages elsewhere are unmapped first if the device is full."""
        first, last = block.offset // segment.page, (block.offset + block.size - 1) // segment.page
        needed = [p for p in range(first, last + 1) if p in segment.unmapped]
        if needed and not self._room_for(len(needed) * segment.page):
            for s in self.segments:
                self._unmap_free_pages(s, pending=block)
            needed = [p for p in range(first, last + 1) if p in segment.unmapped]
            if not self._room_for(len(needed) * segment.page):
                self._undo(block)
                raise OutOfMemory(self.oom_message(nbytes))
        segment.unmapped.difference_update(needed)
        self._reserved = None

    def _undo(self, block: Block) -> None:
        owner = block.owner
        block.owner = None
        self.where.pop(owner, None)
        self.allocated -= block.size
        for s in self.segments:
            self._merge(s)

    def _unmap_free_pages(self, segment: Segment, pending: Block | None = None) -> None:
        if not segment.page:
            return
        used = set()
        for b in segment.blocks:
            if b.owner and b is not pending:
                used.update(range(b.offset // segment.page, (b.offset + b.size - 1) // segment.page + 1))
        segment.unmapped = set(range(segment.size // segment.page)) - used
        self._reserved = None

    def _room_for(self, extra: int) -> bool:
        return self.capacity is None or self.reserved + extra <= self.capacity

    @staticmethod
    def _split(segment: Segment, block: Block, size: int) -> None:
        rest = block.size - size
        if rest >= MIN_BLOCK if segment.small else rest > SMALL_SIZE:
            i = segment.blocks.index(block)
            segment.blocks.insert(i + 1, Block(block.offset + size, rest))
            block.size = size

    @staticmethod
    def _merge(segment: Segment) -> None:
        merged: list[Block] = []
        for b in segment.blocks:
            if merged and merged[-1].owner is None and b.owner is None:
                merged[-1].size += b.size
            else:
                merged.append(b)
        segment.blocks = merged

    def _update_peaks(self) -> None:
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def oom_message(self, nbytes: int) -> str:
        """torch.OutOfMemoryError's message (OOM_FORMAT), filled in from the model's state. 'Tried to allocate' is
        what the allocator asked the device for: the request rounded to its segment size (get_allocation_size).
        The modelled process holds only its segments (no CUDA context), so its memory in use is what it reserved."""
        cap = self.capacity or 0
        reserved, allocated = self.reserved, self.allocated
        return OOM_FORMAT.format(alloc=torch_size(segment_size(round_size(nbytes))), total=torch_size(cap),
                                 free=torch_size(cap - reserved), process=torch_size(reserved),
                                 allocated=torch_size(allocated), cached=torch_size(reserved - allocated))
