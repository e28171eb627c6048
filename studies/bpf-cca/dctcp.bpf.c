// DCTCP (RFC 8257) as a BPF struct_ops congestion control, written for
// ccbench. Once per window of data the sender updates its estimate alpha of
// the fraction of CE-marked segments (EWMA with gain g = 1/16); on a
// congestion signal it cuts the window by alpha/2 instead of 1/2. Growth is
// Reno's. As receiver it echoes CE per segment: ECE exactly while CE arrives,
// with an immediate ACK when that changes.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

#define ALPHA_ONE 1024U /* alpha is a fraction in 1/1024 */
#define G_SHIFT 4       /* g = 1/16 */
#define ECN_DEMAND_CWR 4 /* TCP_ECN_DEMAND_CWR: our ACKs carry ECE */
#define CONG_NEEDS_ECN 2 /* TCP_CONG_NEEDS_ECN */

struct dctcp_state {
	__u32 window_end;  /* snd_nxt when this observation window began */
	__u32 delivered0;  /* tp->delivered then */
	__u32 ce0;         /* tp->delivered_ce then */
	__u32 alpha;
	__u32 cwnd_before; /* cwnd before the last reduction */
	__u32 rcv_nxt0;    /* receiver: rcv_nxt at the last CE change check */
	__u32 ce;          /* receiver: the last segment carried CE */
};

static __always_inline struct dctcp_state *state(struct sock *sk)
{
	return (struct dctcp_state *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void new_window(struct tcp_sock *tp, struct dctcp_state *st)
{
	st->window_end = tp->snd_nxt;
	st->delivered0 = tp->delivered;
	st->ce0 = tp->delivered_ce;
}

SEC("struct_ops/dctcp_start")
void BPF_PROG(dctcp_start, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct dctcp_state *st = state(sk);

	st->alpha = ALPHA_ONE; /* react fully until the first estimate */
	st->cwnd_before = 0;
	st->ce = 0;
	st->rcv_nxt0 = tp->rcv_nxt;
	new_window(tp, st);
}

SEC("struct_ops/dctcp_estimate")
void BPF_PROG(dctcp_estimate, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct dctcp_state *st = state(sk);
	__u32 delivered, marked, a;

	/* Wait until the ACKs cover the window that began at window_end. */
	if ((__s32)(tp->snd_una - st->window_end) < 0)
		return;
	delivered = tp->delivered - st->delivered0;
	marked = tp->delivered_ce - st->ce0;
	a = st->alpha;
	/* alpha <- (1 - g) alpha + g F, with F = marked / delivered */
	a -= a >> G_SHIFT;
	if (delivered && marked)
		a += (marked << (10 - G_SHIFT)) / delivered;
	st->alpha = a < ALPHA_ONE ? a : ALPHA_ONE;
	new_window(tp, st);
}

SEC("struct_ops/dctcp_cut")
__u32 BPF_PROG(dctcp_cut, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct dctcp_state *st = state(sk);
	__u32 cwnd = tp->snd_cwnd;
	__u32 next = cwnd - ((cwnd * st->alpha) >> 11);

	st->cwnd_before = cwnd;
	return next > 2 ? next : 2;
}

SEC("struct_ops/dctcp_grow")
void BPF_PROG(dctcp_grow, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/dctcp_state_change")
void BPF_PROG(dctcp_state_change, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	/* A timeout is a loss, not a mark: halve as Reno would. */
	if (new_state == TCP_CA_Loss) {
		__u32 half = tp->snd_cwnd >> 1;

		state(sk)->cwnd_before = tp->snd_cwnd;
		tp->snd_ssthresh = half > 2 ? half : 2;
	}
}

SEC("struct_ops/dctcp_event")
void BPF_PROG(dctcp_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct dctcp_state *st = state(sk);
	__u32 ce;

	if (ev != CA_EVENT_ECN_IS_CE && ev != CA_EVENT_ECN_NO_CE)
		return;
	ce = ev == CA_EVENT_ECN_IS_CE;
	/* On a change, first acknowledge what came before with the old echo. */
	if (st->ce != ce && st->rcv_nxt0 != tp->rcv_nxt)
		bpf_tcp_send_ack(tp, st->rcv_nxt0);
	st->ce = ce;
	st->rcv_nxt0 = tp->rcv_nxt;
	if (ce)
		tp->ecn_flags |= ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~ECN_DEMAND_CWR;
}

SEC("struct_ops/dctcp_undo")
__u32 BPF_PROG(dctcp_undo, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 before = state(sk)->cwnd_before;

	return tp->snd_cwnd > before ? tp->snd_cwnd : before;
}

SEC(".struct_ops")
struct tcp_congestion_ops bpf_dctcp = {
	.init = (void *)dctcp_start,
	.in_ack_event = (void *)dctcp_estimate,
	.ssthresh = (void *)dctcp_cut,
	.cong_avoid = (void *)dctcp_grow,
	.set_state = (void *)dctcp_state_change,
	.cwnd_event = (void *)dctcp_event,
	.undo_cwnd = (void *)dctcp_undo,
	.flags = CONG_NEEDS_ECN,
	.name = "bpf_dctcp",
};
