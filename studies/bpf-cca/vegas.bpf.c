// TCP Vegas (Brakmo and Peterson, 1995) as a BPF struct_ops congestion
// control, written for ccbench. Once per round trip it compares the expected
// rate cwnd/BaseRTT with the actual rate cwnd/RTT (RTT: the smallest sample
// of that round): diff = cwnd (RTT - BaseRTT) / BaseRTT segments are queued
// in the network. It keeps diff between alpha = 2 and beta = 4 segments,
// and leaves slow start once diff exceeds gamma = 1. With too few RTT
// samples in a round, or outside the Open state, it behaves as Reno.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

#define ALPHA 2
#define BETA 4
#define GAMMA 1
#define NO_RTT 0x7fffffffU

struct vegas_state {
	__u32 base_rtt;   /* smallest RTT ever seen, us */
	__u32 round_rtt;  /* smallest RTT of this round, us */
	__u32 samples;    /* RTT samples this round */
	__u32 round_end;  /* snd_nxt when this round began */
	__u32 on;         /* Vegas active (Open state) */
};

static __always_inline struct vegas_state *state(struct sock *sk)
{
	return (struct vegas_state *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void new_round(struct tcp_sock *tp, struct vegas_state *v)
{
	v->round_end = tp->snd_nxt;
	v->round_rtt = NO_RTT;
	v->samples = 0;
}

SEC("struct_ops/vegas_start")
void BPF_PROG(vegas_start, struct sock *sk)
{
	struct vegas_state *v = state(sk);

	v->base_rtt = NO_RTT;
	v->on = 1;
	new_round((struct tcp_sock *)sk, v);
}

SEC("struct_ops/vegas_sample")
void BPF_PROG(vegas_sample, struct sock *sk, const struct ack_sample *s)
{
	struct vegas_state *v = state(sk);
	__u32 rtt;

	if (s->rtt_us < 0)
		return;
	rtt = s->rtt_us + 1; /* never zero */
	if (rtt < v->base_rtt)
		v->base_rtt = rtt;
	if (rtt < v->round_rtt)
		v->round_rtt = rtt;
	v->samples++;
}

SEC("struct_ops/vegas_state_change")
void BPF_PROG(vegas_state_change, struct sock *sk, __u8 new_state)
{
	struct vegas_state *v = state(sk);

	if (new_state == TCP_CA_Open) {
		v->on = 1;
		new_round((struct tcp_sock *)sk, v);
	} else {
		v->on = 0;
	}
}

SEC("struct_ops/vegas_event")
void BPF_PROG(vegas_event, struct sock *sk, enum tcp_ca_event ev)
{
	/* After idle the old round's samples say nothing. */
	if (ev == CA_EVENT_CWND_RESTART || ev == CA_EVENT_TX_START)
		new_round((struct tcp_sock *)sk, state(sk));
}

SEC("struct_ops/vegas_grow")
void BPF_PROG(vegas_grow, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct vegas_state *v = state(sk);
	__u32 cwnd, rtt, diff;

	if (!v->on) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if ((__s32)(ack - v->round_end) <= 0) {
		/* Within a round: slow start keeps growing per ACK. */
		if (tp->snd_cwnd < tp->snd_ssthresh)
			tcp_slow_start(tp, acked);
		return;
	}
	/* A round ended: decide once. */
	if (v->samples <= 2) {
		tcp_reno_cong_avoid(sk, ack, acked);
		new_round(tp, v);
		return;
	}
	cwnd = tp->snd_cwnd;
	rtt = v->round_rtt;
	diff = (__u32)(((__u64)cwnd * (rtt - v->base_rtt)) / v->base_rtt);
	if (cwnd < tp->snd_ssthresh) {
		if (diff > GAMMA) {
			/* Queue building in slow start: go to the expected
			 * window and leave slow start. */
			__u32 expected = (__u32)(((__u64)cwnd * v->base_rtt) / rtt) + 1;

			if (expected < cwnd)
				cwnd = expected;
			tp->snd_ssthresh = cwnd > 3 ? cwnd - 1 : 2;
		}
	} else if (diff > BETA) {
		cwnd--;
		if (tp->snd_ssthresh > cwnd)
			tp->snd_ssthresh = cwnd > 3 ? cwnd - 1 : 2;
	} else if (diff < ALPHA) {
		cwnd++;
	}
	if (cwnd < 2)
		cwnd = 2;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
	new_round(tp, v);
}

#ifndef VEGAS_LOSS_SSTHRESH
/* Linux's tcp_vegas.c: a loss halves the window. A file that includes this
 * one may define another rule (../many-flows/vegas-ns3.bpf.c). */
#define VEGAS_LOSS_SSTHRESH(sk) tcp_reno_ssthresh(sk)
#endif

SEC("struct_ops/vegas_ssthresh")
__u32 BPF_PROG(vegas_ssthresh, struct sock *sk)
{
	return VEGAS_LOSS_SSTHRESH(sk);
}

SEC("struct_ops/vegas_undo")
__u32 BPF_PROG(vegas_undo, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops bpf_vegas = {
	.init = (void *)vegas_start,
	.pkts_acked = (void *)vegas_sample,
	.set_state = (void *)vegas_state_change,
	.cwnd_event = (void *)vegas_event,
	.cong_avoid = (void *)vegas_grow,
	.ssthresh = (void *)vegas_ssthresh,
	.undo_cwnd = (void *)vegas_undo,
	.name = "bpf_vegas",
};
