// Megatron-LM's constraints, read at core_v0.15.0 (REFERENCE.md §3.2) and
// its pipeline layout syntax (§3.3). Messages name the rule and the flags
// so a failed launcher check points at both the cause and the source.
#include "io/megatron/megatron_args.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <utility>

namespace hapmoe {

namespace {

constexpr std::size_t kMaxLayoutSymbols = 1u << 20;

std::string n(long long v) { return std::to_string(v); }

}  // namespace

std::string parse_pipeline_layout(const std::string& layout, std::vector<LayoutStage>& stages) {
  // Recursive descent over: seq := item*; item := ( '(' seq ')' | sym ) ('*' int)?
  // A sequence is a list of "tokens": symbols and stage breaks.
  std::size_t pos = 0;
  std::string error;
  std::function<std::string(int)> seq;  // returns the expanded token string
  auto read_int = [&](std::size_t& p) -> long long {
    long long v = 0;
    const std::size_t start = p;
    while (p < layout.size() && std::isdigit(static_cast<unsigned char>(layout[p])) != 0) {
      v = v * 10 + (layout[p] - '0');
      if (v > static_cast<long long>(kMaxLayoutSymbols)) return -1;
      ++p;
    }
    return p == start ? -1 : v;
  };
  seq = [&](int depth) -> std::string {
    std::string out;
    if (depth > 32) {
      error = "parentheses are nested too deeply";
      return out;
    }
    while (pos < layout.size() && error.empty()) {
      const char c = layout[pos];
      if (c == ')') break;
      std::string item;
      if (c == '(') {
        ++pos;
        item = seq(depth + 1);
        if (!error.empty()) return out;
        if (pos >= layout.size() || layout[pos] != ')') {
          error = "unbalanced '(' in the layout";
          return out;
        }
        ++pos;
      } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
        item = std::string(1, c);
        ++pos;
      } else if (c == ',' || c == ' ') {
        ++pos;
        continue;
      } else {
        error = std::string("unknown symbol '") + c +
                "' in the layout (allowed: E, t, m, L, |, (...)*n, x*n, commas)";
        return out;
      }
      long long times = 1;
      if (pos < layout.size() && layout[pos] == '*') {
        ++pos;
        times = read_int(pos);
        if (times < 0) {
          error = "'*' must be followed by a repeat count up to " + n(kMaxLayoutSymbols);
          return out;
        }
      }
      if (static_cast<long long>(item.size()) * times + static_cast<long long>(out.size()) >
          static_cast<long long>(kMaxLayoutSymbols)) {
        error = "the layout expands to more than " + n(kMaxLayoutSymbols) + " symbols";
        return out;
      }
      for (long long k = 0; k < times; ++k) out += item;
    }
    return out;
  };
  const std::string flat = seq(0);
  if (error.empty() && pos != layout.size()) error = "unbalanced ')' in the layout";
  if (!error.empty()) return error;
  stages.assign(1, LayoutStage{});
  for (char c : flat) {
    switch (c) {
      case '|':
        stages.emplace_back();
        break;
      case 'E':
        ++stages.back().embedding;
        break;
      case 't':
        ++stages.back().decoder;
        break;
      case 'm':
        ++stages.back().mtp;
        break;
      case 'L':
        ++stages.back().loss;
        break;
      default:
        break;
    }
  }
  return "";
}

std::vector<int> interleaved_stage_layers(const std::vector<int>& stage_layers, int vpp) {
  const std::size_t pp = stage_layers.size();
  std::vector<int> out(pp * static_cast<std::size_t>(vpp), 0);
  for (std::size_t i = 0; i < pp; ++i) {
    for (int j = 0; j < vpp; ++j) {
      out[static_cast<std::size_t>(j) * pp + i] =
          stage_layers[i] / vpp + (j < stage_layers[i] % vpp ? 1 : 0);
    }
  }
  return out;
}

std::string make_pipeline_layout(const std::vector<int>& stage_layers, int mtp_layers) {
  std::string out;
  for (std::size_t i = 0; i < stage_layers.size(); ++i) {
    if (i > 0) out += "|";
    std::string body;
    if (i == 0) body += "E";
    const int t = stage_layers[i];
    if (t == 1) {
      body += (body.empty() ? "" : ",") + std::string("t");
    } else if (t > 1) {
      body += (body.empty() ? "" : ",") + std::string("t*") + std::to_string(t);
    }
    if (i + 1 == stage_layers.size()) {
      if (mtp_layers == 1) body += (body.empty() ? "" : ",") + std::string("m");
      if (mtp_layers > 1)
        body +=
            (body.empty() ? std::string() : std::string(",")) + "m*" + std::to_string(mtp_layers);
      body += (body.empty() ? "" : ",") + std::string("L");
    }
    out += body;
  }
  return out;
}

std::vector<std::string> check_megatron_settings(const MegatronSettings& s) {
  std::vector<std::string> v;
  const bool moe = s.num_experts > 0;
  for (const auto& [flag, value] :
       {std::pair<const char*, int>{"--tensor-model-parallel-size", s.tp},
        {"--pipeline-model-parallel-size", s.pp},
        {"--context-parallel-size", s.cp},
        {"--expert-model-parallel-size", s.ep},
        {"--expert-tensor-parallel-size", s.etp},
        {"--micro-batch-size", s.micro_batch},
        {"--num-layers", s.num_layers},
        {"--num-attention-heads", s.num_heads},
        {"world size", s.world_size}}) {
    if (value < 1) v.push_back(std::string(flag) + " = " + n(value) + " must be at least 1");
  }
  if (!v.empty()) return v;
  // Products in 64 bits: degrees come from user scripts.
  const long long tpc = static_cast<long long>(s.tp) * s.pp * s.cp;
  const long long epp = static_cast<long long>(s.etp) * s.ep * s.pp;
  // 1. world = TP x PP x CP x DP.
  if (s.world_size % tpc != 0) {
    v.push_back("§3.2.1: world size " + n(s.world_size) +
                " is not divisible by --tensor-model-parallel-size x "
                "--pipeline-model-parallel-size x --context-parallel-size = " +
                n(tpc));
  }
  // 2. Expert side: world = ETP x EP x EDP x PP.
  if (s.world_size % epp != 0) {
    v.push_back("§3.2.2: world size " + n(s.world_size) +
                " is not divisible by --expert-tensor-parallel-size x "
                "--expert-model-parallel-size x --pipeline-model-parallel-size = " +
                n(epp));
  }
  // 3. Experts over EP; EP needs experts and no fp16.
  if (s.ep > 1 && !moe) {
    v.push_back("§3.2.3: --expert-model-parallel-size " + n(s.ep) +
                " needs --num-experts (the model is dense)");
  }
  if (moe && s.num_experts % s.ep != 0) {
    v.push_back("§3.2.3: --num-experts " + n(s.num_experts) +
                " is not divisible by --expert-model-parallel-size " + n(s.ep));
  }
  if (s.ep > 1 && s.fp16) {
    v.push_back("§3.2.3: --expert-model-parallel-size " + n(s.ep) +
                " > 1 is rejected with --fp16 (use --bf16)");
  }
  // 4. Heads and query groups over TP.
  if (s.num_heads % s.tp != 0) {
    v.push_back("§3.2.4: --num-attention-heads " + n(s.num_heads) +
                " is not divisible by --tensor-model-parallel-size " + n(s.tp));
  }
  if (s.num_query_groups > 0 && s.num_query_groups % s.tp != 0) {
    v.push_back("§3.2.4: --num-query-groups " + n(s.num_query_groups) +
                " is not divisible by --tensor-model-parallel-size " + n(s.tp));
  }
  // 5. Sequence over CP; positions cover the sequence.
  if (s.cp > 1 && s.seq_length % (2 * s.cp) != 0) {
    v.push_back("§3.2.5: --seq-length " + n(s.seq_length) +
                " is not divisible by 2 x --context-parallel-size = " + n(2LL * s.cp));
  }
  if (s.max_position_embeddings > 0 && s.max_position_embeddings < s.seq_length) {
    v.push_back("§3.2.5: --max-position-embeddings " + n(s.max_position_embeddings) +
                " is smaller than --seq-length " + n(s.seq_length));
  }
  // 6. MoE training with TP needs sequence parallelism (with TP = 1
  //    Megatron turns SP off with a warning: megatron_settings reads it so).
  if (moe && s.tp > 1 && !s.sequence_parallel) {
    v.push_back("§3.2.6: MoE with --tensor-model-parallel-size " + n(s.tp) +
                " > 1 requires --sequence-parallel");
  }
  // 7. One way of virtual pipelining.
  const int vpp_ways = (s.vpp_layers ? 1 : 0) + (s.vpp_stages ? 1 : 0) + (s.layout.empty() ? 0 : 1);
  if (vpp_ways > 1) {
    v.emplace_back(
        "§3.2.7: give at most one of --num-layers-per-virtual-pipeline-stage, "
        "--num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout");
  }
  // 10. VPP needs PP > 1.
  if ((s.vpp_layers || s.vpp_stages) && s.pp == 1) {
    v.emplace_back("§3.2.10: virtual pipeline stages need --pipeline-model-parallel-size > 1");
  }
  const bool uneven = s.first_stage_layers || s.last_stage_layers;
  if (!s.layout.empty()) {
    // §3.3 layout rules.
    std::vector<LayoutStage> st;
    if (const std::string e = parse_pipeline_layout(s.layout, st); !e.empty()) {
      v.push_back("§3.3: --pipeline-model-parallel-layout \"" + s.layout + "\": " + e);
    } else {
      int e_count = 0, l_count = 0, t_count = 0, m_count = 0;
      for (const LayoutStage& x : st) {
        e_count += x.embedding;
        l_count += x.loss;
        t_count += x.decoder;
        m_count += x.mtp;
      }
      if (st.size() % static_cast<std::size_t>(s.pp) != 0) {
        v.push_back("§3.3: --pipeline-model-parallel-layout has " +
                    n(static_cast<long long>(st.size())) +
                    " stages, not a multiple of --pipeline-model-parallel-size " + n(s.pp));
      }
      if (e_count != 1 || st.front().embedding != 1) {
        v.push_back(
            "§3.3: --pipeline-model-parallel-layout must have exactly one E, in the first "
            "stage (has " +
            n(e_count) + ")");
      }
      if (l_count != 1 || st.back().loss != 1) {
        v.push_back(
            "§3.3: --pipeline-model-parallel-layout must have exactly one L, in the last "
            "stage (has " +
            n(l_count) + ")");
      }
      if (t_count != s.num_layers) {
        v.push_back("§3.3: --pipeline-model-parallel-layout has " + n(t_count) +
                    " decoder layers (t) but --num-layers is " + n(s.num_layers));
      }
      if (m_count != s.mtp_layers) {
        v.push_back("§3.3: --pipeline-model-parallel-layout has " + n(m_count) +
                    " MTP layers (m) but --mtp-num-layers is " + n(s.mtp_layers));
      }
      for (std::size_t i = 0; i + 1 < st.size(); ++i) {
        if (st[i].mtp > 0) {
          v.push_back("§3.3: MTP layers (m) must be in the last stage, with L (stage " +
                      n(static_cast<long long>(i)) + " has some)");
          break;
        }
      }
    }
    if (uneven) {
      v.emplace_back(
          "§3.2.9: --decoder-first/last-pipeline-num-layers cannot be combined with "
          "--pipeline-model-parallel-layout");
    }
    if (s.account_for_embedding || s.account_for_loss) {
      v.emplace_back(
          "§3.2.9: --account-for-embedding/loss-in-pipeline-split cannot be combined "
          "with --pipeline-model-parallel-layout");
    }
  } else if (uneven) {
    // 9. Uneven first/last stages.
    const int first = s.first_stage_layers.value_or(0);
    const int last = s.last_stage_layers.value_or(0);
    if ((s.first_stage_layers && first < 1) || (s.last_stage_layers && last < 1)) {
      v.emplace_back("§3.2.9: --decoder-first/last-pipeline-num-layers must be positive");
    }
    if (s.pp == 1) {
      v.emplace_back(
          "§3.2.9: --decoder-first/last-pipeline-num-layers need "
          "--pipeline-model-parallel-size > 1");
    }
    const int middle = s.pp - (s.first_stage_layers ? 1 : 0) - (s.last_stage_layers ? 1 : 0);
    const int rest = s.num_layers - first - last;
    if (rest < 0 || (middle > 0 && rest % middle != 0) || (middle <= 0 && rest != 0) ||
        (middle > 0 && rest == 0)) {
      v.push_back("§3.2.9: --num-layers " + n(s.num_layers) + " minus the first (" + n(first) +
                  ") and last (" + n(last) + ") stages leaves " + n(rest) +
                  " layers, which do not divide evenly over the " + n(std::max(middle, 0)) +
                  " middle stages");
    }
    if (s.account_for_embedding || s.account_for_loss) {
      v.emplace_back(
          "§3.2.9: --decoder-first/last-pipeline-num-layers cannot be combined with "
          "--account-for-embedding/loss-in-pipeline-split");
    }
  } else {
    // 8. Even split.
    const int total =
        s.num_layers + (s.account_for_embedding ? 1 : 0) + (s.account_for_loss ? 1 : 0);
    if (total % s.pp != 0) {
      v.push_back("§3.2.8: --num-layers " + n(s.num_layers) +
                  (total != s.num_layers ? " (+ embedding/loss accounted = " + n(total) + ")"
                                         : std::string()) +
                  " is not divisible by --pipeline-model-parallel-size " + n(s.pp) +
                  " (use --decoder-first/last-pipeline-num-layers or "
                  "--pipeline-model-parallel-layout for an uneven split)");
    } else if (s.vpp_layers && (total / s.pp) % *s.vpp_layers != 0) {
      v.push_back("§3.2.8: layers per stage " + n(total / s.pp) +
                  " are not divisible by --num-layers-per-virtual-pipeline-stage " +
                  n(*s.vpp_layers));
    }
  }
  // 11. Recomputation.
  if (s.recompute_granularity == "full") {
    if (s.recompute_method.empty() || !s.recompute_num_layers) {
      v.emplace_back(
          "§3.2.11: --recompute-granularity full needs --recompute-method and "
          "--recompute-num-layers");
    }
    if (!s.recompute_method.empty() && s.recompute_method != "uniform" &&
        s.recompute_method != "block") {
      v.push_back("§3.2.11: --recompute-method " + s.recompute_method +
                  " is not one of uniform, block");
    }
    if (s.recompute_num_layers && *s.recompute_num_layers < 1) {
      v.emplace_back("§3.2.11: --recompute-num-layers must be at least 1");
    }
  } else if (s.recompute_granularity == "selective") {
    if (!s.recompute_method.empty() || s.recompute_num_layers) {
      v.emplace_back(
          "§3.2.11: --recompute-granularity selective forbids --recompute-method and "
          "--recompute-num-layers");
    }
  } else if (!s.recompute_granularity.empty()) {
    v.push_back("§3.2.11: --recompute-granularity " + s.recompute_granularity +
                " is not one of full, selective");
  } else if (!s.recompute_method.empty() || s.recompute_num_layers) {
    v.emplace_back(
        "§3.2.11: --recompute-method / --recompute-num-layers without "
        "--recompute-granularity full have no effect");
  }
  // 12. Parameter-gather overlap needs the distributed optimizer.
  if (s.overlap_param_gather && !s.distributed_optimizer) {
    v.emplace_back("§3.2.12: --overlap-param-gather needs --use-distributed-optimizer");
  }
  // 13. MoE with biased linear layers needs ETP = 1.
  if (moe && s.bias_linear && s.etp != 1) {
    v.push_back(
        "§3.2.13: MoE with bias in linear layers (no --disable-bias-linear) requires "
        "--expert-tensor-parallel-size 1, got " +
        n(s.etp));
  }
  // Batch (§3.1 help text): global = micro x DP x micro-batches.
  if (s.world_size % tpc == 0) {
    const long long mdp = static_cast<long long>(s.micro_batch) * (s.world_size / tpc);
    if (s.global_batch < 1 || s.global_batch % mdp != 0) {
      v.push_back("§3.1: --global-batch-size " + n(s.global_batch) +
                  " is not a positive multiple of --micro-batch-size x DP = " + n(mdp));
    }
  }
  return v;
}

int MegatronSettings::vpp() const {
  if (vpp_stages) return *vpp_stages;
  if (vpp_layers && pp > 0 && *vpp_layers > 0) {
    // core_v0.15.0 arguments.py counts the embedding and the loss as a
    // layer each when the split accounts for them.
    const int counted = num_layers + (account_for_embedding ? 1 : 0) + (account_for_loss ? 1 : 0);
    return std::max(1, counted / pp / *vpp_layers);
  }
  if (!layout.empty() && pp > 0) {
    std::vector<LayoutStage> st;
    if (parse_pipeline_layout(layout, st).empty()) {
      return std::max(1, static_cast<int>(st.size()) / pp);
    }
  }
  return 1;
}

std::vector<int> megatron_stage_layers(const MegatronSettings& s) {
  std::vector<int> out(static_cast<std::size_t>(s.pp), 0);
  if (!s.layout.empty()) {
    std::vector<LayoutStage> st;
    if (parse_pipeline_layout(s.layout, st).empty()) {
      for (std::size_t i = 0; i < st.size(); ++i) {
        out[i % static_cast<std::size_t>(s.pp)] += st[i].decoder;
      }
    }
    return out;
  }
  if (s.first_stage_layers || s.last_stage_layers) {
    const int first = s.first_stage_layers.value_or(0);
    const int last = s.last_stage_layers.value_or(0);
    const int middle = s.pp - (s.first_stage_layers ? 1 : 0) - (s.last_stage_layers ? 1 : 0);
    const int each = middle > 0 ? (s.num_layers - first - last) / middle : 0;
    for (int i = 0; i < s.pp; ++i) out[static_cast<std::size_t>(i)] = each;
    if (s.first_stage_layers) out.front() = first;
    if (s.last_stage_layers) out.back() = last;
    return out;
  }
  const int acc_e = s.account_for_embedding ? 1 : 0;
  const int acc_l = s.account_for_loss ? 1 : 0;
  const int each = (s.num_layers + acc_e + acc_l) / s.pp;
  for (int i = 0; i < s.pp; ++i) out[static_cast<std::size_t>(i)] = each;
  out.front() -= acc_e;
  out.back() -= acc_l;
  return out;
}

}  // namespace hapmoe
