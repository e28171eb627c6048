// ns-3 3.37's TcpVegas loss response on ccbench's BPF Vegas
// (../bpf-cca/vegas.bpf.c, otherwise unchanged): on a loss ssthresh becomes
// max(min(ssthresh, cwnd - 1 segment), 2) (TcpVegas::GetSsThresh) instead of
// Linux's tcp_reno_ssthresh (half of cwnd). A diagnostic for the
// vegas-newreno study (README.md here), not a model of Linux.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

static __always_inline __u32 ns3_vegas_ssthresh(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 one_less = tp->snd_cwnd > 1 ? tp->snd_cwnd - 1 : 1;
	__u32 t = tp->snd_ssthresh < one_less ? tp->snd_ssthresh : one_less;

	return t > 2 ? t : 2;
}

#define VEGAS_LOSS_SSTHRESH(sk) ns3_vegas_ssthresh(sk)
#include "../bpf-cca/vegas.bpf.c"
