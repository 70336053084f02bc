"""Batched rounds: one drafter forward and one target verify forward for many requests.

`BatchDecoder` owns the slotted caches (`slot_cache.py`) of up to `slots`
requests and runs what `decoding.Session` runs for one request, for all
decoding requests at once. Each request (`SeqState`) keeps its own
`DecodeParams`, token chooser (`choice.py`: sampler, generator, min_tokens,
logprobs), positions and drafter features;
row r of a round is slot r, rows 0..B-1.

A batched round (docs/ddtree.md "Engine"):
  1. draft   one drafter forward over every row: each row's new features
             (padded to the longest) plus its block `[root, MASK x (block-1)]`;
             a row's mask shows its own context (its window) and its block;
             rows in mode "ar" are padding here
  2. tree    per row, as `Session`: best-first tree / top-1 chain / none (ar),
             shortened to the room left in that request's context
  3. verify  one target forward over `[root] + nodes` of every row, padded to
             the largest tree; row r sees its own past and its ancestors
             (`packing.verify_batch`); padding writes to the scratch slot
  4. walk    each row follows its target's own choices (`walk.py`: one
             LM-head matmul over all nodes, or one per depth for big trees)
  5. commit  per row: compact its accepted path in place, keep its features

Prefill runs one request at a time (`prefill`, in chunks if the scheduler
says so) and also writes the prompt's drafter context (`DFlashDrafter.ingest`),
so rounds never pad the drafter input to a prompt's length.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ddtune.ddtree.batch.packing import VerifyBatch, draft_mask, verify_batch
from ddtune.ddtree.batch.slot_cache import SlotCache
from ddtune.ddtree.choice import TokenChooser
from ddtune.ddtree.decoding import STAGES, RoundOutcome
from ddtune.ddtree.logprobs import TokenLogprob, logprobs_of
from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.models.model import Decoder, causal_mask
from ddtune.ddtree.tree import DraftTree, build_tree, chain_tree
from ddtune.ddtree.walk import walk
from ddtune.params import DecodeParams


@dataclass
class SeqState:
    """One request's decoding state in a batch (what `Session` holds for one)."""

    params: DecodeParams
    chooser: TokenChooser
    capacity: int  # context slots this request may use (as `Session.capacity`)
    prompt: list[int]
    prompt_logprobs: int | None = None  # record the prompt tokens' logprobs + the top N
    prompt_token_logprobs: list[TokenLogprob] = field(default_factory=list)
    slot: int = -1
    prefilled: int = 0  # prompt tokens in the cache
    pos: int = 0  # position of the root = committed tokens in the cache
    root: int = -1
    feats: torch.Tensor | None = None  # [C, L*H] features the drafter has not seen
    feat_pos: int = 0  # position of feats[0]

    @property
    def speculative(self) -> bool:
        return self.params.mode != "ar"

    @property
    def prefill_left(self) -> int:
        return len(self.prompt) - self.prefilled


@dataclass
class RoundReport:
    """One batched round, for metrics: rows, real and padded verify tokens, stage seconds."""

    rows: int
    verify_tokens: int  # sum over rows of tree size + 1
    padded_tokens: int  # rows x the widest row
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))


class BatchDecoder:
    """Runs prefills and batched rounds over `slots` request slots (`reserve` grows them)."""

    def __init__(
        self, target: Decoder, drafter: DFlashDrafter | None, slots: int, capacity: int = 256
    ) -> None:
        self.target, self.drafter = target, drafter
        like = target.lm_head.weight
        self.cache = SlotCache.for_model(target.cfg, slots, capacity, like)
        self.dcache = None
        self.layer_ids: list[int] = []
        if drafter is not None:
            self.dcache = SlotCache.for_model(drafter.cfg, slots, capacity, like)
            self.layer_ids = list(drafter.cfg.target_layer_ids)

    # --- slots ---------------------------------------------------------------

    def reserve(self, capacity: int) -> None:
        """Make every slot hold `capacity` positions (a request's `SeqState.capacity`)."""
        for cache in self._caches():
            cache.reserve(capacity)

    def swap(self, a: int, b: int) -> None:
        for cache in self._caches():
            cache.swap(a, b)

    def move(self, src: int, dst: int) -> None:
        for cache in self._caches():
            cache.move(src, dst)

    def _caches(self) -> list[SlotCache]:
        return [self.cache] + ([self.dcache] if self.dcache is not None else [])

    # --- prefill ---------------------------------------------------------------

    def prefill(self, seq: SeqState, count: int) -> torch.Tensor | None:
        """Run the next `count` prompt tokens; the last position's logits once the prompt is in."""
        start, end = seq.prefilled, seq.prefilled + count
        if start == 0:
            for cache in self._caches():
                cache.clear(seq.slot)
        ids = torch.tensor([seq.prompt[start:end]])
        layer_ids = self.layer_ids if seq.speculative else []
        view = self.cache.view(seq.slot, [start], [count], count)
        out = self.target(
            ids,
            positions=torch.arange(start, end)[None],
            cache=view,
            attn_mask=causal_mask(start, count),
            hidden_layer_ids=layer_ids,
            last_logits_only=seq.prompt_logprobs is None,  # else logits at every position
        )
        assert out.logits is not None
        seq.prefilled = seq.pos = end
        if seq.prompt_logprobs is not None:  # position t predicts prompt token t + 1
            targets = seq.prompt[start + 1 : end + 1]
            seq.prompt_token_logprobs += logprobs_of(
                out.logits[0, : len(targets)], targets, seq.prompt_logprobs
            )
        if layer_ids:
            self._ingest(seq, torch.cat(out.hidden, dim=-1), start)
        if seq.prefill_left:
            return None
        return out.logits[0, -1]

    def _ingest(self, seq: SeqState, feats: torch.Tensor, start: int) -> None:
        """Write a prompt chunk's drafter context keys into the request's drafter slot."""
        assert self.drafter is not None and self.dcache is not None
        count = feats.shape[1]
        view = self.dcache.view(seq.slot, [start], [count], count)
        self.drafter.ingest(feats, torch.arange(start, start + count)[None], view)
        seq.feat_pos = start + count

    # --- one round ---------------------------------------------------------------

    def round(self, seqs: list[SeqState], max_tokens: list[int]) -> list[RoundOutcome]:
        """One round for rows 0..len(seqs)-1 (seqs[r].slot == r), each emitting <= max_tokens[r]."""
        report = RoundReport(len(seqs), 0, 0)
        t0 = time.perf_counter()
        depths = [self._max_depth(s, m) for s, m in zip(seqs, max_tokens, strict=True)]
        drafts = self._draft(seqs, depths) if any(s.speculative for s in seqs) else {}
        t1 = time.perf_counter()
        trees = [
            self._tree(s, d, drafts.get(r))
            for r, (s, d) in enumerate(zip(seqs, depths, strict=True))
        ]
        batch = verify_batch([s.root for s in seqs], [s.pos for s in seqs], trees)
        t2 = time.perf_counter()
        final, hidden = self._verify(seqs, trees, batch)
        walks = walk(self.target.lm_logits, seqs, trees, final)
        t3 = time.perf_counter()
        outcomes = [
            self._commit(s, t, path, tokens, hidden, r)
            for r, (s, t, (path, tokens)) in enumerate(zip(seqs, trees, walks, strict=True))
        ]
        t4 = time.perf_counter()
        report.verify_tokens = sum(t.size + 1 for t in trees)
        report.padded_tokens = batch.ids.numel()
        report.seconds.update(draft=t1 - t0, tree=t2 - t1, verify=t3 - t2, commit=t4 - t3)
        self.last_report = report
        return outcomes

    def _max_depth(self, seq: SeqState, max_tokens: int) -> int:
        """Deepest tree this row may verify (0: no draft), as `Session.step`."""
        if self.drafter is None or not seq.speculative:
            return 0
        room = seq.capacity - seq.pos - 1
        depth = min(self.drafter.cfg.block_size - 1, max_tokens - 1, room)
        if seq.params.mode == "ddtree":
            depth = min(depth, seq.params.budget)
        return depth

    def _draft(
        self, seqs: list[SeqState], depths: list[int]
    ) -> dict[int, tuple[list[list[float]], list[list[int]]]]:
        """Per row with depth > 0: per-depth top-K log-probs and ids (one drafter forward)."""
        assert self.drafter is not None and self.dcache is not None
        cfg = self.drafter.cfg
        rows = len(seqs)
        news = [s.feats.shape[0] if s.speculative and s.feats is not None else 0 for s in seqs]
        width = max(news)
        hidden_size = len(self.layer_ids) * self.target.cfg.hidden_size
        feats = torch.zeros((rows, width, hidden_size), dtype=self.cache.k.dtype)
        c_pos = torch.zeros((rows, width), dtype=torch.long)
        block = torch.full((rows, cfg.block_size), cfg.mask_token_id)
        for r, s in enumerate(seqs):
            if news[r]:
                assert s.feats is not None and s.feat_pos + news[r] == s.pos
                feats[r, : news[r]] = s.feats
                c_pos[r, : news[r]] = torch.arange(s.feat_pos, s.pos)
                s.feats, s.feat_pos = None, s.pos
            block[r, 0] = s.root if s.speculative else 0
        q_pos = torch.tensor([s.pos for s in seqs])[:, None] + torch.arange(cfg.block_size)
        starts = [self.dcache.lengths[r] for r in range(rows)]
        view = self.dcache.view(0, starts, news, width)
        mask = draft_mask(starts, news, [s.params.window for s in seqs], cfg.block_size)
        hidden = self.drafter(
            self.target.embed(block), feats, q_pos, c_pos, attn_mask=mask, cache=view
        )
        return self._top_k(seqs, depths, hidden)

    def _top_k(
        self, seqs: list[SeqState], depths: list[int], hidden: torch.Tensor
    ) -> dict[int, tuple[list[list[float]], list[list[int]]]]:
        rows = [r for r, d in enumerate(depths) if d > 0]
        if not rows:
            return {}
        deepest = max(depths)
        logits = self.target.lm_logits(hidden[rows, 1 : deepest + 1])  # [R, D, V]
        ks = [1 if seqs[r].params.mode == "dflash" else seqs[r].params.topk for r in rows]
        k = min(max(ks), logits.shape[-1])
        values, ids = torch.log_softmax(logits.float(), dim=-1).topk(k, dim=-1)
        lps, toks = values.tolist(), ids.tolist()
        return {
            r: (
                [row[:kr] for row in lps[i][: depths[r]]],
                [row[:kr] for row in toks[i][: depths[r]]],
            )
            for i, (r, kr) in enumerate(zip(rows, ks, strict=True))
        }

    def _tree(
        self,
        seq: SeqState,
        depth: int,
        draft: tuple[list[list[float]], list[list[int]]] | None,
    ) -> DraftTree:
        if depth <= 0 or draft is None:
            return DraftTree.empty()
        top_lp, top_ids = draft
        if seq.params.mode == "dflash":
            return chain_tree(top_ids, top_lp)
        room = seq.capacity - seq.pos - 1
        return build_tree(top_lp, top_ids, min(seq.params.budget, room), seq.params.topk)

    def _verify(
        self, seqs: list[SeqState], trees: list[DraftTree], batch: VerifyBatch
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Final-norm states [B, T, H] and features [B, T, L*H] (None without a drafter row)."""
        counts = [t.size + 1 for t in trees]
        view = self.cache.view(0, [s.pos for s in seqs], counts, batch.ids.shape[1])
        layer_ids = self.layer_ids if any(s.speculative for s in seqs) else []
        out = self.target(
            batch.ids,
            positions=batch.positions,
            cache=view,
            attn_mask=batch.mask,
            hidden_layer_ids=layer_ids,
            logits=False,
        )
        assert out.final is not None
        hidden = torch.cat(out.hidden, dim=-1) if layer_ids else None
        return out.final, hidden

    def _commit(
        self,
        seq: SeqState,
        tree: DraftTree,
        path: list[int],
        tokens: list[int],
        hidden: torch.Tensor | None,
        row: int,
    ) -> RoundOutcome:
        """Keep the accepted path's KV (in place) and queue its features for the drafter."""
        start = seq.pos
        self.cache.compact(seq.slot, torch.tensor(path) + start, start)
        seq.pos, seq.root = start + len(path), tokens[-1]
        if hidden is not None and seq.speculative:
            new = hidden[row, path]  # [len(path), L*H] at positions start, start+1, ...
            if seq.feats is None:
                seq.feats, seq.feat_pos = new, start
            else:
                seq.feats = torch.cat([seq.feats, new])
        return RoundOutcome(tokens, tree.size)
