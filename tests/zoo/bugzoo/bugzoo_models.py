"""The bug zoo's model families: small, real models whose B side may carry one bug of meaning.

Every family is built by ``build(family, seed, bug)``: the weights come from
torch.manual_seed and the data from a separate generator, both on the CPU in fp32, so a bug
never changes a weight or an input; it is one wrong line in the forward (or, for the
trajectory, in the optimizer), switched on by ``bug`` and propagated by the rest of the run.
``BUGS[family]`` names each family's bugs and says what the wrong line is.

Families (issue 36, item 7):
    gpt     tiny causal decoder: pre-LN blocks, explicit attention (scores, mask, Softmax, P v),
            GELU MLP, untied head; next-token cross-entropy
    bncnn   conv net with train-mode BatchNorm over few values (batch 2, 4x4 at the end),
            a residual, global mean pool; cross-entropy; running statistics dumped
    lstm    an LSTM cell unrolled by hand (Linear gate modules), the sequence in two chunks
            whose state is carried over; per-step cross-entropy
    mlp_ln  MLP with LayerNorm, GELU, Dropout and a residual, in eval mode; cross-entropy
    dlrm    DLRM-like: bottom MLP, three EmbeddingBag(sum) tables with variable bags, pairwise
            dot interaction, top MLP; binary cross-entropy
    traj    a training trajectory: MLP with BatchNorm1d, AdamW written out, 10 steps, every
            step dumped (forward, gradients, parameters after the step, running statistics,
            eval-mode logits on a held-out batch)
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILIES = ["gpt", "bncnn", "lstm", "mlp_ln", "dlrm", "traj"]

BUGS = {
    "gpt": {
        "ln_eps": "LayerNorm eps 1e-2 instead of 1e-5 (ln1 of every block)",
        "gelu_tanh": "GELU(approximate='tanh') instead of the exact erf GELU",
        "attn_scale": "scores divided by head_dim instead of sqrt(head_dim)",
        "mask_off_by_one": "causal mask triu(2) instead of triu(1): a token sees the next one",
        "no_attn_residual": "x = proj(attn) instead of x + proj(attn)",
        "softmax_dim": "attention Softmax over the query axis (dim -2) instead of the key axis",
        "pos_off_by_one": "position embeddings looked up at pos + 1",
        "qk_swap": "q and k taken in the wrong order from the qkv split",
    },
    "bncnn": {
        "bn_eps": "BatchNorm eps 1e-3 instead of 1e-5 (bn2)",
        "bn_eval": "bn3 normalises with its running statistics (eval mode) in a training step",
        "bn_unbiased": "BatchNorm normalises with the unbiased batch variance (every bn)",
        "bn_momentum": "BatchNorm momentum 0.01 instead of 0.1 (only the running statistics)",
        "no_residual": "the residual add around conv2 left out",
        "conv_w_transposed": "conv2 (8 -> 8 channels) uses its weight with in/out swapped",
        "max_pool_head": "global max pool instead of global mean pool before the head",
    },
    "lstm": {
        "stale_state": "chunk 2 starts from chunk 1's state one step before its last",
        "state_reset": "chunk 2 starts from a zero state instead of chunk 1's last",
        "gate_order": "forget and cell gates read in the wrong order (i, g, f, o)",
        "forget_bias": "forget gate pre-activation + 1 (a bias the reference does not have)",
        "cell_no_tanh": "h = o * c instead of o * tanh(c)",
        "head_on_cell": "the head reads the cell state c instead of h",
    },
    "mlp_ln": {
        "ln_eps": "LayerNorm eps 1e-3 instead of 1e-5 (ln1)",
        "bias_missing": "fc2 applied without its bias",
        "dropout_on": "dropout left on at inference (F.dropout training=True)",
        "weight_transposed": "fc2's square weight used transposed",
        "ln_no_affine": "ln2 applied without its weight and bias",
        "relu_not_gelu": "ReLU instead of GELU",
        "ln_wrong_dim": "ln1 normalises over the batch axis instead of the features",
    },
    "dlrm": {
        "offsets_shift": "EmbeddingBag offsets shifted by one (offsets[1:] + 1)",
        "bag_mean": "EmbeddingBag mode mean instead of sum (table 0)",
        "index_off_by_one": "table 1 looked up at index + 1",
        "interaction_pairs": "interaction pairs from triu_indices(offset 0) instead of offset 1",
        "table_swap": "tables 1 and 2 looked up with each other's indices",
        "bottom_no_relu": "the bottom MLP's ReLU left out",
    },
    "traj": {
        "adam_no_bias_correction": "Adam without bias correction of m and v",
        "weight_decay_coupled": "weight decay added to the gradient (L2) instead of decoupled",
        "adam_eps_inside_sqrt": "eps inside the square root: sqrt(v + eps)",
        "bn_momentum": "BatchNorm1d momentum 0.01 instead of 0.1",
        "lr_warmup_off_by_one": "warm-up factor t / 4 instead of (t + 1) / 4",
        "zero_grad_missing": "gradients not zeroed between steps (they accumulate)",
        "betas_swapped": "Adam betas (0.999, 0.9) instead of (0.9, 0.999)",
    },
}

TRAJ_STEPS = 10


class Spec:
    """What a family's run needs.  inputs: tuple of CPU tensors (fp32 or integer); target: CPU
    tensor; loss: "ce" (cross-entropy over the last axis) or "bce" (with logits); buffers: dump
    the model's buffers after the forward; ks: reduction lengths by module path; steps: 1, or
    the trajectory's length (then ``batches`` holds each step's (inputs, target), ``held_out``
    the eval batch and ``optimizer`` the AdamW to use)."""

    def __init__(self, model, inputs, target, loss="ce", buffers=False, ks=None, notes="",
                 train=True):
        self.model, self.inputs, self.target, self.loss = model, inputs, target, loss
        self.buffers, self.ks, self.notes, self.train = buffers, ks or {}, notes, train
        self.steps, self.batches, self.held_out, self.optimizer = 1, None, None, None


# ============================================================================ gpt
class Scores(nn.Module):
    """q k^T * scale with the causal mask (-inf above the diagonal); K = head_dim."""

    def __init__(self, head_dim, bug):
        super().__init__()
        self.reduction_length = head_dim
        self.head_dim, self.bug = head_dim, bug

    def forward(self, q, k):
        d = self.head_dim
        scale = 1.0 / d if self.bug == "attn_scale" else d ** -0.5
        s = torch.matmul(q, k.transpose(-2, -1)) * scale
        T = s.shape[-1]
        diag = 2 if self.bug == "mask_off_by_one" else 1
        mask = torch.ones(T, T, dtype=torch.bool, device=s.device).triu(diag)
        return s.masked_fill(mask, float("-inf"))


class ApplyAttn(nn.Module):
    def __init__(self, seq):
        super().__init__()
        self.reduction_length = seq

    def forward(self, p, v):
        return torch.matmul(p, v)


class Block(nn.Module):
    def __init__(self, dim, heads, seq, mlp, bug):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.ln1 = nn.LayerNorm(dim, eps=1e-2 if bug == "ln_eps" else 1e-5)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.scores = Scores(dim // heads, bug)
        self.softmax = nn.Softmax(dim=-2 if bug == "softmax_dim" else -1)
        self.apply_attn = ApplyAttn(seq)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.act = nn.GELU(approximate="tanh") if bug == "gelu_tanh" else nn.GELU()
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(B, T, 3, self.heads, D // self.heads) \
            .permute(2, 0, 3, 1, 4).unbind(0)
        if self.bug == "qk_swap":
            q, k = k, q
        a = self.apply_attn(self.softmax(self.scores(q, k)), v)
        h = self.proj(a.transpose(1, 2).reshape(B, T, D))
        x = h if self.bug == "no_attn_residual" else x + h
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, bug, vocab=64, dim=32, heads=2, seq=16, mlp=64, depth=2):
        super().__init__()
        self.bug = bug
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq + 1, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, seq, mlp, bug) for _ in range(depth)])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        with torch.no_grad():
            self.wte.weight.mul_(0.3)
            self.wpe.weight.mul_(0.3)

    def forward(self, tok):
        pos = torch.arange(tok.shape[1], device=tok.device)
        if self.bug == "pos_off_by_one":
            pos = pos + 1
        return self.head(self.ln_f(self.blocks(self.wte(tok) + self.wpe(pos))))


# ============================================================================ bncnn
class BN2d(nn.BatchNorm2d):
    """nn.BatchNorm2d; the bugs bn_unbiased and bn_eval change how it normalises."""

    def __init__(self, c, bug, eps=1e-5, momentum=0.1, eval_stats=False):
        super().__init__(c, eps=eps, momentum=momentum)
        self.bug, self.eval_stats = bug, eval_stats

    def forward(self, x):
        if self.eval_stats:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                False, 0.0, self.eps)
        if self.bug == "bn_unbiased":
            super().forward(x)  # updates the running statistics as torch does
            mean = x.mean(dim=(0, 2, 3), keepdim=True)
            var = x.var(dim=(0, 2, 3), unbiased=True, keepdim=True)
            w, b = self.weight.view(1, -1, 1, 1), self.bias.view(1, -1, 1, 1)
            return (x - mean) / torch.sqrt(var + self.eps) * w + b
        return super().forward(x)


class Conv2dT(nn.Conv2d):
    """nn.Conv2d; transposed=True is the bug conv_w_transposed (in and out channels swapped in
    the square weight)."""

    def __init__(self, *args, transposed=False, **kw):
        super().__init__(*args, **kw)
        self.transposed = transposed

    def forward(self, x):
        w = self.weight.transpose(0, 1) if self.transposed else self.weight
        return self._conv_forward(x, w, self.bias)


class BNCNN(nn.Module):
    def __init__(self, bug, classes=10):
        super().__init__()
        self.bug = bug
        mom = 0.01 if bug == "bn_momentum" else 0.1
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = BN2d(8, bug, momentum=mom)
        self.conv2 = Conv2dT(8, 8, 3, 1, 1, bias=False, transposed=bug == "conv_w_transposed")
        self.bn2 = BN2d(8, bug, eps=1e-3 if bug == "bn_eps" else 1e-5, momentum=mom)
        self.conv3 = nn.Conv2d(8, 16, 3, 2, 1, bias=False)
        self.bn3 = BN2d(16, bug, momentum=mom, eval_stats=bug == "bn_eval")
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(x))
        x = F.relu(y) if self.bug == "no_residual" else F.relu(x + y)
        x = F.relu(self.bn3(self.conv3(x)))
        pooled = x.amax(dim=(2, 3)) if self.bug == "max_pool_head" else x.mean(dim=(2, 3))
        return self.fc(pooled)


# ============================================================================ lstm
class Cell(nn.Module):
    """One LSTM step from two Linear gate modules (both dumped): (h, c) out."""

    def __init__(self, feat, hidden, bug):
        super().__init__()
        self.ih = nn.Linear(feat, 4 * hidden)
        self.hh = nn.Linear(hidden, 4 * hidden)
        self.bug = bug

    def forward(self, x, h, c):
        g = self.ih(x) + self.hh(h)
        if self.bug == "gate_order":
            i, gg, f, o = g.chunk(4, dim=-1)
        else:
            i, f, gg, o = g.chunk(4, dim=-1)
        if self.bug == "forget_bias":
            f = f + 1.0
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
        h = torch.sigmoid(o) * (c if self.bug == "cell_no_tanh" else torch.tanh(c))
        return h, c


class CellLoop(nn.Module):
    """The unrolled cell over one chunk; returns (outputs B,T,H, final state, state one step
    before the final).  Its own output is not dumped (only its leaves' calls)."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, x, h, c):
        outs, cells, prev = [], [], (h, c)
        for t in range(x.shape[1]):
            prev = (h, c)
            h, c = self.cell(x[:, t], h, c)
            outs.append(h)
            cells.append(c)
        return torch.stack(outs, 1), torch.stack(cells, 1), (h, c), prev


class LSTMTagger(nn.Module):
    def __init__(self, bug, feat=8, hidden=16, classes=6, chunk=6):
        super().__init__()
        self.bug, self.hidden, self.chunk = bug, hidden, chunk
        self.loop = CellLoop(Cell(feat, hidden, bug))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        B = x.shape[0]
        h = c = x.new_zeros(B, self.hidden)
        outs = []
        for s in range(0, x.shape[1], self.chunk):
            hs, cs, last, prev = self.loop(x[:, s:s + self.chunk], h, c)
            outs.append(cs if self.bug == "head_on_cell" else hs)
            h, c = prev if self.bug == "stale_state" else last
            if self.bug == "state_reset":
                h, c = torch.zeros_like(h), torch.zeros_like(c)
        return self.head(torch.cat(outs, 1))


# ============================================================================ mlp_ln
class Lin(nn.Linear):
    """nn.Linear; bug "bias_missing" leaves the bias out, "weight_transposed" uses W^T."""

    def __init__(self, i, o, bug=None):
        super().__init__(i, o)
        self.bug = bug

    def forward(self, x):
        w = self.weight.t() if self.bug == "weight_transposed" else self.weight
        return F.linear(x, w, None if self.bug == "bias_missing" else self.bias)


class LN(nn.LayerNorm):
    """nn.LayerNorm; bug "no_affine" drops weight and bias, "wrong_dim" normalises over the
    batch axis (of a 2-D input) instead of the features."""

    def __init__(self, n, eps=1e-5, bug=None):
        super().__init__(n, eps=eps)
        self.bug = bug

    def forward(self, x):
        if self.bug == "no_affine":
            return F.layer_norm(x, self.normalized_shape, None, None, self.eps)
        if self.bug == "wrong_dim":
            y = F.layer_norm(x.t(), (x.shape[0],), None, None, self.eps).t()
            return y * self.weight + self.bias
        return super().forward(x)


class MLPLN(nn.Module):
    """fc1 -> ln1 -> GELU -> dropout -> fc2 (square) -> ln2 -> + residual -> head; eval mode."""

    def __init__(self, bug, feat=32, hidden=64, classes=10):
        super().__init__()
        self.bug = bug
        self.fc1 = nn.Linear(feat, hidden)
        self.ln1 = LN(hidden, eps=1e-3 if bug == "ln_eps" else 1e-5,
                      bug="wrong_dim" if bug == "ln_wrong_dim" else None)
        self.act = nn.ReLU() if bug == "relu_not_gelu" else nn.GELU()
        self.drop = nn.Dropout(0.1)
        self.fc2 = Lin(hidden, hidden, bug)
        self.ln2 = LN(hidden, bug="no_affine" if bug == "ln_no_affine" else None)
        self.head = nn.Linear(hidden, classes)
        with torch.no_grad():  # affine parameters that matter
            for ln in (self.ln1, self.ln2):
                ln.weight.copy_(1.0 + 0.3 * torch.randn(hidden))
                ln.bias.copy_(0.2 * torch.randn(hidden))

    def forward(self, x):
        h = self.act(self.ln1(self.fc1(x)))
        h = self.drop(h)
        if self.bug == "dropout_on":
            h = F.dropout(h, 0.1, training=True)
        return self.head(h + self.ln2(self.fc2(h)))


# ============================================================================ dlrm
class Interaction(nn.Module):
    """Pairwise dot products of the feature vectors (B, F, D) -> (B, pairs); K = D."""

    def __init__(self, nfeat, dim, bug):
        super().__init__()
        self.reduction_length = dim
        off = 0 if bug == "interaction_pairs" else 1
        li, lj = torch.triu_indices(nfeat, nfeat, off)
        npairs = nfeat * (nfeat - 1) // 2
        self.register_buffer("li", li[:npairs].clone(), persistent=False)
        self.register_buffer("lj", lj[:npairs].clone(), persistent=False)

    def forward(self, z):
        zz = torch.bmm(z, z.transpose(1, 2))
        return zz[:, self.li, self.lj]


class DLRM(nn.Module):
    def __init__(self, bug, dense=8, dim=16, rows=100, tables=3):
        super().__init__()
        self.bug = bug
        self.bot1 = nn.Linear(dense, 16)
        self.bot2 = nn.Linear(16, dim)
        self.tables = nn.ModuleList(
            [nn.EmbeddingBag(rows, dim, mode="mean" if bug == "bag_mean" and t == 0 else "sum")
             for t in range(tables)])
        self.inter = Interaction(tables + 1, dim, bug)
        npairs = (tables + 1) * tables // 2
        self.top1 = nn.Linear(dim + npairs, 32)
        self.top2 = nn.Linear(32, 1)
        with torch.no_grad():
            for t in self.tables:
                t.weight.mul_(0.3)

    def forward(self, dense, *io):
        """io: each table's indices, then each table's offsets (bags of variable size)."""
        n = len(self.tables)
        idx, off = io[:n], io[n:]
        h = self.bot1(dense)
        x = self.bot2(h if self.bug == "bottom_no_relu" else F.relu(h))
        embs = []
        for t, table in enumerate(self.tables):
            i, o = idx[t], off[t]
            if self.bug == "offsets_shift":
                o = torch.cat([o[:1], o[1:] + 1])
            if self.bug == "index_off_by_one" and t == 1:
                i = (i + 1) % table.num_embeddings
            if self.bug == "table_swap" and t in (1, 2):
                i, o = idx[3 - t], off[3 - t]
            embs.append(table(i, o))
        z = self.inter(torch.stack([x] + embs, 1))
        return self.top2(F.relu(self.top1(torch.cat([x, z], 1)))).squeeze(1)


# ============================================================================ traj
class TrajMLP(nn.Module):
    def __init__(self, bug, feat=16, hidden=32, classes=5):
        super().__init__()
        self.fc1 = nn.Linear(feat, hidden, bias=False)  # a bias before BatchNorm has a 0
        # gradient, whose rounding noise Adam would normalise into +-lr steps
        self.bn = nn.BatchNorm1d(hidden, momentum=0.01 if bug == "bn_momentum" else 0.1)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.bn(self.fc1(x))))))


class AdamW:
    """AdamW written out (torch.optim.AdamW's update, lr warm-up over 4 steps); the optimizer
    bugs are wrong lines here.  State in the parameters' dtype and device."""

    def __init__(self, params, bug, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        self.params = list(params)
        self.bug, self.lr, self.eps, self.wd = bug, lr, eps, weight_decay
        self.betas = betas[::-1] if bug == "betas_swapped" else betas
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    def zero_grad(self):
        if self.bug == "zero_grad_missing":
            return
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        warm = self.t / 4 if self.bug == "lr_warmup_off_by_one" else (self.t + 1) / 4
        lr = self.lr * min(1.0, warm)
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            if self.bug == "weight_decay_coupled":
                g = g + self.wd * p
            else:
                p.mul_(1 - lr * self.wd)
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            if self.bug == "adam_no_bias_correction":
                mh, vh = m, v
            else:
                mh, vh = m / (1 - b1 ** self.t), v / (1 - b2 ** self.t)
            if self.bug == "adam_eps_inside_sqrt":
                denom = (vh + self.eps).sqrt()
            else:
                denom = vh.sqrt() + self.eps
            p.addcdiv_(mh, denom, value=-lr)


# ============================================================================ build
def build(family, seed, bug=None):
    """Spec of ``family`` with ``bug`` (None: honest).  Same weights and data for every bug."""
    if bug is not None and bug not in BUGS[family]:
        raise KeyError("%s has no bug %r (known: %s)" % (family, bug, ", ".join(BUGS[family])))
    fseed = seed * 1000 + FAMILIES.index(family) + 101
    torch.manual_seed(fseed)
    g = torch.Generator().manual_seed(20000 + fseed)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    def randint(n, *shape):
        return torch.randint(0, n, shape, generator=g)

    if family == "gpt":
        B, T, V = 2, 16, 64
        return Spec(GPT(bug, vocab=V, seq=T), (randint(V, B, T),), randint(V, B, T),
                    ks={"blocks.%d.apply_attn" % i: T for i in range(2)},
                    notes="causal decoder, 2 pre-LN blocks, dim 32, 2 heads, seq 16")
    if family == "bncnn":
        B = 2
        return Spec(BNCNN(bug), (randn(B, 3, 8, 8),), randint(10, B), buffers=True,
                    notes="train-mode BatchNorm over 128/128/32 values per channel")
    if family == "lstm":
        B, S = 2, 12
        return Spec(LSTMTagger(bug), (randn(B, S, 8),), randint(6, B, S),
                    notes="LSTM cell unrolled by hand, two chunks of 6 steps")
    if family == "mlp_ln":
        B = 8
        return Spec(MLPLN(bug), (randn(B, 32),), randint(10, B), train=False,
                    notes="MLP with LayerNorm, GELU, Dropout, residual; eval mode")
    if family == "dlrm":
        B, tables, rows = 8, 3, 100
        idx, off = [], []
        sizes = torch.randint(2, 6, (tables, B), generator=g)
        for t in range(tables):
            idx.append(randint(rows, int(sizes[t].sum())))
            off.append(torch.cat([torch.zeros(1, dtype=torch.long), sizes[t].cumsum(0)[:-1]]))
        spec = Spec(DLRM(bug, rows=rows, tables=tables), (randn(B, 8), *idx, *off),
                    (torch.rand(B, generator=g) < 0.5).float(), loss="bce",
                    notes="DLRM-like: EmbeddingBag(sum) x3, dot interaction")
        return spec
    if family == "traj":
        model = TrajMLP(bug)
        spec = Spec(model, None, None, buffers=True,
                    notes="MLP + BatchNorm1d, AdamW by hand, %d steps" % TRAJ_STEPS)
        spec.steps = TRAJ_STEPS
        spec.batches = [(randn(16, 16), randint(5, 16)) for _ in range(TRAJ_STEPS)]
        spec.held_out = randn(16, 16)
        spec.optimizer = lambda params: AdamW(params, bug)
        return spec
    raise KeyError(family)


def n_bugs():
    return sum(len(b) for b in BUGS.values())

