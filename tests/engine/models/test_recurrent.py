"""Recurrent and hybrid models: which layers hold a fixed state and which a KV cache, and the
state's size, checked on tiny GGUF headers against numbers worked out by hand from
llama.cpp's rules:

- ``llama_hparams::n_embd_r()`` / ``n_embd_s()`` (src/llama-hparams.cpp): RWKV
  ``token_shift_count x n_embd`` and ``n_embd x wkv.head_size``; LFM2
  ``n_embd x (shortconv.l_cache - 1)`` and ``ssm_d_state x ssm_d_inner`` (0); Mamba
  ``(ssm.conv_kernel - 1) x (ssm.inner_size + 2 x ssm.group_count x ssm.state_size)`` and
  ``ssm.state_size x ssm.inner_size``.
- ``llama_memory_recurrent``'s constructor (src/llama-memory-recurrent.cpp): per recurrent
  layer an ``r_l`` of ``n_embd_r`` and an ``s_l`` of ``n_embd_s`` floats a cell, and
  ``llama_model::create_memory`` (src/llama-model.cpp): f32 both, ``max(1, n_seq_max)``
  cells.
- ``recurrent_layer_arr`` in the hparams loading (src/llama-model.cpp): every layer for
  Mamba/RWKV and Falcon-H1, ``head_count_kv == 0`` for Jamba, Granite hybrids and LFM2 (and
  ``feed_forward_length == 0`` for Nemotron-H), ``(i + 1) % full_attention_interval != 0``
  for Qwen3-Next.

None of these is checked on a server: no such model is at hand here.
"""

from __future__ import annotations

import pytest

from tests.engine.models.made_models import write_recurrent_model
from workbench.cli.main import main
from workbench.engine.models.memory import (
    MIB,
    kv_bytes_per_token,
    kv_caches,
    kv_layout,
    read_model_facts,
    server_memory,
)

MAMBA_130M = {"ssm.conv_kernel": 4, "ssm.inner_size": 1536, "ssm.state_size": 16}


def test_a_pure_mamba_holds_its_state_and_no_kv(tmp_path, capsys):
    """mamba-130m's shape: 24 layers, n_embd 768, d_conv 4, d_inner 1536, d_state 16, no
    ``head_count_kv`` (which used to be refused). n_embd_r = 3 x 1536 = 4608, n_embd_s =
    16 x 1536 = 24576; (4608 + 24576) x 4 B x 24 layers = 2,801,664 B = 2.671875 MiB a
    sequence; -np 4: 4 cells, 10.6875 MiB, whatever the context."""
    path = write_recurrent_model(tmp_path / "m.gguf", "mamba", 24, 768, MAMBA_130M)
    facts = read_model_facts(path)
    state = facts.recurrent
    assert state is not None and facts.recurrent_note == ""
    assert (state.r_floats, state.s_floats) == (4608, 24576)
    assert state.recurrent_layers == 24 and state.attention_layers == 0
    assert state.bytes_per_sequence == 2_801_664
    assert kv_bytes_per_token(facts) == 0
    for ctx in (4096, 131072):
        caches = kv_caches(facts, kv_layout(ctx, 4))
        assert (caches.full_mib, caches.state_mib, caches.total_mib) == (0, 10.6875, 10.6875)
    assert main(["plan", str(path), "--slots", "4", "--memory-gib", "8"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "24 layers (24 recurrent: 2.7 MiB of state per sequence)" in out
    assert "no layer holds a KV cache" in out and " 10.7 " in out


def test_one_cell_even_without_slots():
    """``max(1, n_seq_max)`` cells: a state is held even for n_seq_max 0."""
    from workbench.engine.models.recurrent import RecurrentState

    state = RecurrentState((True,), (False,), 1, 1)
    assert state.bytes_for(0) == state.bytes_for(1) == 8


def test_mamba2_counts_its_groups(tmp_path):
    """mamba2-130m's shape: d_conv 4, d_inner 1536, d_state 128, 1 group. n_embd_r =
    3 x (1536 + 2 x 1 x 128) = 5376, n_embd_s = 128 x 1536 = 196608; (5376 + 196608) x 4 B
    x 24 = 19,390,464 B = 18.4921875 MiB a sequence. Mamba-1 reads no group count: the same
    key on a "mamba" header changes nothing."""
    keys = {"ssm.conv_kernel": 4, "ssm.inner_size": 1536, "ssm.state_size": 128}
    keys["ssm.group_count"] = 1
    mamba2 = read_model_facts(write_recurrent_model(tmp_path / "m2.gguf", "mamba2", 24, 768, keys))
    assert (mamba2.recurrent.r_floats, mamba2.recurrent.s_floats) == (5376, 196608)
    assert mamba2.recurrent.bytes_per_sequence / MIB == 18.4921875
    mamba1 = read_model_facts(write_recurrent_model(tmp_path / "m1.gguf", "mamba", 24, 768, keys))
    assert mamba1.recurrent.r_floats == 3 * 1536


@pytest.mark.parametrize(
    ("arch", "keys", "r", "s"),
    [
        # RWKV6 1.6B's shape, no token_shift_count key: 2 x 2048, 2048 x 64.
        ("rwkv6", {"wkv.head_size": 64}, 4096, 131072),
        # token_shift_count 1 (as ARWKV7's converter writes): 1 x 2048.
        ("rwkv7", {"wkv.head_size": 64, "token_shift_count": 1}, 2048, 131072),
    ],
)
def test_rwkv_token_shifts_and_wkv_state(tmp_path, arch, keys, r, s):
    """24 layers, n_embd 2048: (r + s) x 4 B x 24, e.g. RWKV6 (4096 + 131072) x 96 =
    12,976,128 B = 12.375 MiB a sequence."""
    facts = read_model_facts(write_recurrent_model(tmp_path / "r.gguf", arch, 24, 2048, keys))
    assert (facts.recurrent.r_floats, facts.recurrent.s_floats) == (r, s)
    assert facts.recurrent.bytes_per_sequence == (r + s) * 4 * 24
    assert server_memory(facts, 8192, 2, runtime=0).kv_mib == 2 * (r + s) * 96 / MIB


LFM2_KV = [0, 0, 8, 0, 0, 8, 0, 0, 8, 0, 8, 0, 8, 0, 8, 0]  # LFM2-1.2B: 6 attention layers


def test_lfm2_holds_kv_in_its_attention_layers_and_a_short_conv_state(tmp_path):
    """LFM2-1.2B's shape: 16 layers, n_embd 2048, 32 heads (head size 64), ``head_count_kv``
    0 on its 10 short-convolution layers, l_cache 3. State: n_embd_r = 2048 x 2 = 4096,
    n_embd_s = 0; 4096 x 4 B x 10 = 163,840 B = 0.15625 MiB a sequence. KV: 6 layers x 8
    heads x (64 x 2 + 64 x 2) B = 12,288 B a token; -c 8192 -np 2: 2 x 4096 cells = 96 MiB,
    plus 2 x 0.15625 MiB of state."""
    keys = {"shortconv.l_cache": 3, "attention.head_count": 32, "attention.head_count_kv": LFM2_KV}
    facts = read_model_facts(write_recurrent_model(tmp_path / "l.gguf", "lfm2", 16, 2048, keys))
    state = facts.recurrent
    assert (state.recurrent_layers, state.attention_layers) == (10, 6)
    assert state.bytes_per_sequence == 163_840
    assert kv_bytes_per_token(facts) == 12_288
    caches = kv_caches(facts, kv_layout(8192, 2))
    assert (caches.full_mib, caches.state_mib) == (96.0, 0.3125)


def test_qwen3_next_every_fourth_layer_is_attention(tmp_path):
    """Qwen3-Next-80B's shape: 48 layers, n_embd 2048, a scalar ``head_count_kv`` 2 (the
    loader, not the key, says which layers attend: ``(i + 1) % 4 != 0`` is recurrent), key
    and value 256; d_conv 4, d_inner 4096, d_state 128, 16 groups. State: n_embd_r =
    3 x (4096 + 2 x 16 x 128) = 24576, n_embd_s = 128 x 4096 = 524288; (24576 + 524288) x
    4 B x 36 = 79,036,416 B = 75.375 MiB a sequence. KV: 12 layers x 2 heads x (256 x 2 +
    256 x 2) B = 24,576 B a token (not 48 layers' 98,304)."""
    keys = {
        "attention.head_count": 16,
        "attention.head_count_kv": 2,
        "attention.key_length": 256,
        "attention.value_length": 256,
        "ssm.conv_kernel": 4,
        "ssm.inner_size": 4096,
        "ssm.state_size": 128,
        "ssm.group_count": 16,
    }
    facts = read_model_facts(
        write_recurrent_model(tmp_path / "q.gguf", "qwen3next", 48, 2048, keys)
    )
    state = facts.recurrent
    assert state.attention == tuple((i + 1) % 4 == 0 for i in range(48))
    assert state.bytes_per_sequence / MIB == 75.375
    assert kv_bytes_per_token(facts) == 24_576
    keys["full_attention_interval"] = 6
    six = read_model_facts(write_recurrent_model(tmp_path / "q6.gguf", "qwen3next", 48, 2048, keys))
    assert six.recurrent.attention_layers == 8


def test_granite_and_jamba_attend_where_head_count_kv_is_set(tmp_path):
    """Granite 4.0-H-Tiny's shape: 40 layers, 4 attending (kv 4), n_embd 1536, 12 heads;
    d_conv 4, d_inner 3072, d_state 128, 1 group: n_embd_r = 3 x (3072 + 256) = 9984,
    n_embd_s = 393216; (9984 + 393216) x 4 B x 36 = 58,060,800 B a sequence. Jamba (8
    layers, one attending, d_inner 8192, d_state 16, no groups read): n_embd_r = 3 x 8192 =
    24576, n_embd_s = 131072; 155648 x 4 B x 7 = 4,358,144 B."""
    granite_kv = [4 if i % 10 == 5 else 0 for i in range(40)]
    granite = {"attention.head_count": 12, "attention.head_count_kv": granite_kv}
    granite |= {"ssm.conv_kernel": 4, "ssm.inner_size": 3072, "ssm.state_size": 128}
    granite["ssm.group_count"] = 1
    facts = read_model_facts(
        write_recurrent_model(tmp_path / "g.gguf", "granitehybrid", 40, 1536, granite)
    )
    assert (facts.recurrent.recurrent_layers, facts.recurrent.attention_layers) == (36, 4)
    assert facts.recurrent.bytes_per_sequence == 58_060_800
    assert kv_bytes_per_token(facts) == 4 * 4 * (128 * 2 + 128 * 2)
    jamba = {"attention.head_count": 32, "attention.head_count_kv": [0, 0, 0, 0, 8, 0, 0, 0]}
    jamba |= {"ssm.conv_kernel": 4, "ssm.inner_size": 8192, "ssm.state_size": 16}
    jamba["ssm.group_count"] = 1  # not read for Jamba
    facts = read_model_facts(write_recurrent_model(tmp_path / "j.gguf", "jamba", 8, 4096, jamba))
    assert facts.recurrent.bytes_per_sequence == 4_358_144
    assert facts.kv_heads == (0, 0, 0, 0, 8, 0, 0, 0)


def test_nemotron_h_and_falcon_h1_layer_kinds(tmp_path):
    """Nemotron-H: a layer is recurrent when it has neither KV heads nor a feed-forward, an
    attention layer has KV heads and no feed-forward, the rest are MLP layers (neither).
    Falcon-H1: every layer holds both a state and a KV cache."""
    ssm = {"ssm.conv_kernel": 4, "ssm.inner_size": 64, "ssm.state_size": 8, "ssm.group_count": 1}
    nemotron = ssm | {
        "attention.head_count": 4,
        "attention.head_count_kv": [0, 0, 0, 0, 2, 0],
        "feed_forward_length": [0, 256, 0, 256, 0, 0],
    }
    facts = read_model_facts(
        write_recurrent_model(tmp_path / "n.gguf", "nemotron_h", 6, 32, nemotron)
    )
    assert facts.recurrent.recurrent == (True, False, True, False, False, True)
    assert facts.recurrent.attention == (False, False, False, False, True, False)
    falcon = ssm | {"attention.head_count": 4, "attention.head_count_kv": 2}
    facts = read_model_facts(write_recurrent_model(tmp_path / "f.gguf", "falcon-h1", 6, 32, falcon))
    assert facts.recurrent.recurrent_layers == facts.recurrent.attention_layers == 6
    assert facts.kv_heads == (2,) * 6


def test_the_state_ignores_the_kv_type_and_a_unified_pool_holds_one_a_slot(tmp_path):
    """r and s are f32 whatever -ctk/-ctv (``create_memory`` passes GGML_TYPE_F32); a
    unified pool (-kvu, -np -1 = 4 slots) still holds ``n_seq_max`` states."""
    path = write_recurrent_model(tmp_path / "m.gguf", "mamba", 24, 768, MAMBA_130M)
    facts = read_model_facts(path)
    quantised = kv_caches(facts, kv_layout(8192, 4), "q8_0", "q8_0")
    assert quantised.state_mib == kv_caches(facts, kv_layout(8192, 4, unified=True)).state_mib
    assert kv_caches(facts, kv_layout(8192, -1)).state_mib == 10.6875


def test_an_unknown_architecture_with_a_state_is_an_upper_bound(tmp_path, capsys):
    """An architecture this workbench does not know, with SSM keys: no state, every layer
    counted with a full KV cache (30 x 3 x (64 x 2 + 64 x 2) = 23,040 B a token), a note."""
    keys = {"attention.head_count": 9, "attention.head_count_kv": 3} | MAMBA_130M
    path = write_recurrent_model(tmp_path / "u.gguf", "newssm", 30, 576, keys)
    facts = read_model_facts(path)
    assert facts.recurrent is None
    assert "'newssm' keeps a recurrent state" in facts.recurrent_note
    assert kv_bytes_per_token(facts) == 23_040
    assert main(["plan", str(path), "--ctx", "8192", "--slots", "2", "--memory-gib", "8"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Note: architecture 'newssm'" in out and "an upper bound" in out
    assert "state MiB" not in out


def test_mismatched_per_layer_arrays_are_an_upper_bound(tmp_path):
    keys = {"shortconv.l_cache": 3, "attention.head_count": 32, "attention.head_count_kv": [8, 0]}
    facts = read_model_facts(write_recurrent_model(tmp_path / "l.gguf", "lfm2", 16, 2048, keys))
    assert facts.recurrent is None and "an upper bound" in facts.recurrent_note


def test_the_plan_shows_the_attention_kv_and_the_state_apart(tmp_path, capsys):
    """LFM2-1.2B's shape at -c 8192 -np 2: KV 96.0 MiB, state 0.3 MiB (see above)."""
    keys = {"shortconv.l_cache": 3, "attention.head_count": 32, "attention.head_count_kv": LFM2_KV}
    path = write_recurrent_model(tmp_path / "l.gguf", "lfm2", 16, 2048, keys)
    args = ["plan", str(path), "--ctx", "8192", "--slots", "2", "--memory-gib", "8"]
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "16 layers (6 with a KV cache, 10 recurrent: 0.2 MiB of state per sequence)" in out
    assert "state MiB" in out and " 96.0 " in out and " 0.3 " in out
    assert "modelled from llama.cpp's source and not checked on a server" in out
