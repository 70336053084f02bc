"""One request's decoding state and its rounds: AR steps and DFlash/DDTree draft-verify rounds.

State between rounds: the target KV cache (committed tokens), the `root` (the
last chosen token, not yet run through the target, at position `pos`), and
the target hidden features of committed positions the drafter has not seen.

A speculative round (docs/ddtree.md "Engine"):
  1. draft   the drafter reads the new features and `[root, MASK x (block-1)]`
  2. tree    best-first tree (ddtree) or top-1 chain (dflash), ancestor mask
  3. verify  one target forward over `[root] + nodes` at positions pos + depth
  4. walk    follow the target's own choice while a matching child exists;
             the first unmatched choice is the bonus token (timed as "verify";
             `walk.py`: the LM head over the likely path first, unless the tree is big)
  5. commit  compact the accepted path's KV in place, keep its features
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ddtune.ddtree.choice import TokenChooser
from ddtune.ddtree.logprobs import TokenLogprob, logprobs_of
from ddtune.ddtree.models.drafter import DFlashDrafter
from ddtune.ddtree.models.model import Decoder
from ddtune.ddtree.tree import DraftTree, build_tree, chain_tree, verify_mask
from ddtune.ddtree.walk import walk
from ddtune.params import DecodeParams

STAGES = ("draft", "tree", "verify", "commit")


@dataclass
class RoundOutcome:
    tokens: list[int]  # accepted draft tokens then the bonus token
    tree_size: int  # draft nodes verified (root excluded)


@dataclass
class Session:
    """One request's rounds. `drafter` is needed unless `params.mode` is "ar" (then unused)."""

    target: Decoder
    drafter: DFlashDrafter | None
    params: DecodeParams
    chooser: TokenChooser  # sampler + generator, min_tokens ban, token logprobs
    capacity: int
    prompt_logprobs: int | None = None  # record the prompt tokens' logprobs + the top N
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))

    def __post_init__(self) -> None:
        if self.params.mode == "ar":
            self.drafter = None
        elif self.drafter is None:
            raise ValueError(f"mode {self.params.mode!r} needs a drafter")
        self.cache = self.target.new_cache(self.capacity)
        self.dcache = self.drafter.new_cache(self.capacity) if self.drafter is not None else None
        self.layer_ids = self.drafter.cfg.target_layer_ids if self.drafter is not None else []
        self.root = -1
        self.feats: torch.Tensor | None = None  # [1, C, L*H] features the drafter has not seen
        self.feat_pos = 0  # position of feats[:, 0]
        self.prompt_token_logprobs: list[TokenLogprob] = []  # prompt[1:], with `prompt_logprobs`

    @property
    def pos(self) -> int:
        """Position of the root token (= committed tokens in the cache)."""
        return self.cache.length

    # --- prefill ---------------------------------------------------------------

    def prefill(self, prompt: list[int]) -> int:
        """Run the prompt through the target; returns the first generated token."""
        ids = torch.tensor([prompt])
        every = self.prompt_logprobs is not None  # logits at every prompt position
        out = self.target(
            ids, cache=self.cache, hidden_layer_ids=self.layer_ids, last_logits_only=not every
        )
        assert out.logits is not None
        if self.prompt_logprobs is not None:
            self.prompt_token_logprobs = logprobs_of(
                out.logits[0, :-1], prompt[1:], self.prompt_logprobs
            )
        if self.layer_ids:
            self.feats, self.feat_pos = torch.cat(out.hidden, dim=-1), 0
        self.root = self._choose(out.logits[0, -1])
        return self.root

    @property
    def token_logprobs(self) -> list[TokenLogprob]:
        """Per chosen token, with `logprobs`."""
        return self.chooser.token_logprobs

    def _choose(self, logits: torch.Tensor) -> int:
        """The target's choice of the next output token from its logits [V] (`choice.py`)."""
        return self.chooser.choose(logits)

    # --- one round ---------------------------------------------------------------

    def step(self, max_tokens: int) -> RoundOutcome:
        """One round emitting at most `max_tokens` (>= 1) tokens."""
        if self.drafter is None:  # mode "ar"
            return self._ar_step()
        p = self.params
        room = self.capacity - self.pos - 1  # cache slots left for draft nodes
        max_depth = min(self.drafter.cfg.block_size - 1, max_tokens - 1, room)
        if p.mode == "ddtree":
            max_depth = min(max_depth, p.budget)  # a tree of B nodes is at most B deep
        t0 = time.perf_counter()
        tree = DraftTree.empty()
        if max_depth > 0:
            top_lp, top_ids = self._draft(self.drafter, max_depth)
            t1 = time.perf_counter()
            self.seconds["draft"] += t1 - t0
            if p.mode == "dflash":
                tree = chain_tree(top_ids, top_lp)
            else:
                tree = build_tree(top_lp, top_ids, min(p.budget, room), p.topk)
            t0 = t1
        mask = verify_mask(tree, self.pos)
        t1 = time.perf_counter()
        self.seconds["tree"] += t1 - t0
        final, hidden = self._verify(tree, mask)
        path, tokens = self._walk(tree, final)
        t2 = time.perf_counter()
        self.seconds["verify"] += t2 - t1
        self._commit(tree, path, hidden)
        self.root = tokens[-1]
        self.seconds["commit"] += time.perf_counter() - t2
        return RoundOutcome(tokens, tree.size)

    def _ar_step(self) -> RoundOutcome:
        t0 = time.perf_counter()
        out = self.target(torch.tensor([[self.root]]), cache=self.cache)
        t1 = time.perf_counter()
        self.seconds["verify"] += t1 - t0
        self.root = self._choose(out.logits[0, -1])
        self.seconds["commit"] += time.perf_counter() - t1
        return RoundOutcome([self.root], 0)

    def _draft(
        self, drafter: DFlashDrafter, max_depth: int
    ) -> tuple[list[list[float]], list[list[int]]]:
        """Per-depth top-K log-probs and ids for depths 1..max_depth."""
        cfg = drafter.cfg
        block = torch.full((1, cfg.block_size), cfg.mask_token_id)
        block[0, 0] = self.root
        q_pos = torch.arange(self.pos, self.pos + cfg.block_size)[None]
        c_pos = torch.arange(self.feat_pos, self.pos)[None]
        assert self.feats is not None and self.feats.shape[1] == c_pos.shape[1]
        hidden = drafter(
            self.target.embed(block),
            self.feats,
            q_pos,
            c_pos,
            cache=self.dcache,
            window=self.params.window,
        )
        self.feats = None
        logits = self.target.lm_logits(hidden[0, 1 : max_depth + 1])  # [D, V]
        k = 1 if self.params.mode == "dflash" else min(self.params.topk, logits.shape[-1])
        values, ids = torch.log_softmax(logits.float(), dim=-1).topk(k, dim=-1)
        return values.tolist(), ids.tolist()

    def _verify(
        self, tree: DraftTree, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Final-norm states [N+1, H] and features [N+1, L*H] for `[root] + nodes`."""
        ids = torch.tensor([[self.root, *tree.tokens]])
        positions = self.pos + torch.tensor([[0, *tree.depths]])
        out = self.target(
            ids,
            positions=positions,
            cache=self.cache,
            attn_mask=mask,
            hidden_layer_ids=self.layer_ids,
            logits=False,
        )
        hidden = torch.cat(out.hidden, dim=-1)[0] if self.layer_ids else None
        assert out.final is not None  # logits=False returns the final-norm states
        return out.final[0], hidden

    def _walk(self, tree: DraftTree, final: torch.Tensor) -> tuple[list[int], list[int]]:
        """Accepted verify indices (root first) and emitted tokens (accepted + bonus).

        `walk.py`, as one batch row: the LM head runs over the likely path at
        once (more only where the walk leaves it) unless the tree is big.
        """
        return walk(self.target.lm_logits, [self], [tree], final[None])[0]

    def _commit(self, tree: DraftTree, path: list[int], hidden: torch.Tensor | None) -> None:
        """Keep the accepted path's KV (in place) and queue its features for the drafter."""
        start = self.cache.length - tree.size - 1  # the root's slot
        self.cache.compact(torch.tensor(path) + start, start)
        if hidden is None:
            return
        new = hidden[path][None]  # [1, len(path), L*H] at positions start, start+1, ...
        if self.feats is None:
            self.feats, self.feat_pos = new, start
        else:
            self.feats = torch.cat([self.feats, new], dim=1)
