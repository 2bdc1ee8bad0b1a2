#!/usr/bin/env python3
"""torch_ref.py: PyTorch's CPU training speed on plumb's example networks, the baseline
bench/train_vs_torch.sh divides plumb's figure by.

Builds fmnist-cnn or gpt-mini (examples/models/*.json: the same layers and shapes), trains
it with plain SGD (lr 0.05) on random inputs at batch 64 for --steps steps after --warmup
steps, with torch.set_num_threads(--threads), and prints one line (wall-clock samples/s,
and the process's CPU time per step, which a loaded machine disturbs less at 1 thread):
    torch MODEL threads=N samples/s=X cpu_ms/step=Y
Exits 3 with a line on stderr when torch cannot be imported (the script then skips it).
"""
import argparse
import sys
import time


def build(torch, name):
    nn = torch.nn
    F = torch.nn.functional
    if name == "fmnist-cnn":
        net = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))

        def batch(B):
            return torch.randn(B, 1, 28, 28), torch.randint(0, 10, (B,))

        def loss(out, y):
            return F.cross_entropy(out, y)
        return net, batch, loss

    if name != "gpt-mini":
        sys.exit("torch_ref.py: unknown model %s (fmnist-cnn or gpt-mini)" % name)
    T, D, H, V, L = 64, 128, 4, 256, 4

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(D)
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)

        def forward(self, x):
            B = x.shape[0]
            q, k, v = self.qkv(self.ln(x)).split(D, dim=2)
            q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return x + self.proj(y.transpose(1, 2).reshape(B, T, D))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(D)
            self.fc = nn.Linear(D, 4 * D)
            self.out = nn.Linear(4 * D, D)

        def forward(self, x):
            return x + self.out(F.gelu(self.fc(self.ln(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, D)
            self.wpe = nn.Parameter(torch.zeros(T, D))
            self.blocks = nn.Sequential(*[m() for _ in range(L) for m in (Attn, Mlp)])
            self.ln_f = nn.LayerNorm(D)
            self.head = nn.Linear(D, V)

        def forward(self, tok):
            return self.head(self.ln_f(self.blocks(self.wte(tok) + self.wpe)))

    def batch(B):
        return torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))

    def loss(out, y):
        return F.cross_entropy(out.reshape(-1, V), y.reshape(-1))
    return Gpt(), batch, loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
        print("torch_ref.py: torch not importable (%s)" % e, file=sys.stderr)
        sys.exit(3)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    net, batch, loss = build(torch, a.model)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    data = [batch(a.batch) for _ in range(4)]
    t0 = c0 = 0.0
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            t0, c0 = time.perf_counter(), time.process_time()
        x, y = data[s % len(data)]
        opt.zero_grad(set_to_none=False)
        loss(net(x), y).backward()
        opt.step()
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    print("torch %s threads=%d samples/s=%.1f cpu_ms/step=%.2f"
          % (a.model, a.threads, a.steps * a.batch / dt, 1e3 * dc / a.steps))


if __name__ == "__main__":
    main()
