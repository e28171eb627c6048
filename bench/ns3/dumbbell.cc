// ccbench simulator speed benchmark: the ns-3 reference scenario.
//
// Dumbbell: N senders, each on its own fast access link to one router; one
// bottleneck link from the router to a single receiver. The return path
// (receiver -> router) mirrors the bottleneck (same rate, delay, buffer; no
// random loss). One unlimited bulk TCP flow per sender.
//
//   S0 --\ access (10 Gbit/s, accessDelay)
//   S1 ---+-- R ====== bottleneck (rate, bottleneckDelay) ====== D
//   ...  /
//
// Queueing (--qdisc): "fifo" (default) is a droptail FIFO of bufferPkts
// packets at the bottleneck. The traffic-control layer's root qdisc is
// uninstalled on every device, so the only queue is the PointToPointNetDevice's
// own DropTailQueue (MaxSize = bufferPkts on both bottleneck devices). With no
// qdisc, ns-3's traffic-control layer hands packets straight to the device and
// drops them when the device queue is full (flow-control "stopped"), which is
// plain tail drop; the packet being serialised is not counted against the
// buffer. "fq_codel" installs FqCoDelQueueDisc (limit bufferPkts, quantum
// 1514 bytes, ns-3's defaults otherwise: 1024 queues, target 5 ms, interval
// 100 ms, drop batch 64) as the root qdisc of both bottleneck devices, over a
// one-packet device queue, so the discipline holds the whole queue as Linux's
// does over a NIC with BQL. Access-link device queues are made huge so that
// nothing is ever dropped at the senders.
//
// Output: one JSON line on stdout. Only used by ccbench's bench/, never by
// ccbench itself.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

uint64_t g_bnTxPkts = 0;     // packets that finished serialisation on the bottleneck
uint64_t g_bnTxBytes = 0;    // their size on the wire (incl. 2-byte PPP header)
uint64_t g_bnQueueDrops = 0; // tail drops at the bottleneck (tc layer + device queue)
uint64_t g_lossDrops = 0;    // random-loss drops at the receiver's device
uint64_t g_revQueueDrops = 0;

void
BnTxEnd(Ptr<const Packet> p)
{
    ++g_bnTxPkts;
    g_bnTxBytes += p->GetSize();
}

void
BnDrop(Ptr<const Packet>)
{
    ++g_bnQueueDrops;
}

void
RevDrop(Ptr<const Packet>)
{
    ++g_revQueueDrops;
}

// A drop (overflow or CoDel's) by a queue discipline, counted in *counter.
void
QdiscDrop(uint64_t* counter, Ptr<const QueueDiscItem>)
{
    ++*counter;
}

void
TcDrop(Ptr<const Packet>)
{
    // The router's tc layer only ever drops on a full device queue; the
    // router's access-side devices carry ACKs at 10 Gbit/s and never fill.
    ++g_bnQueueDrops;
}

void
TcDropRev(Ptr<const Packet>)
{
    ++g_revQueueDrops;
}

void
CwndTrace(std::string ctx, uint32_t o, uint32_t n)
{
    std::cerr << Simulator::Now().GetSeconds() << " " << ctx << " cwnd " << n << "\n";
}

void
StateTrace(std::string ctx, TcpSocketState::TcpCongState_t o, TcpSocketState::TcpCongState_t n)
{
    std::cerr << Simulator::Now().GetSeconds() << " " << ctx << " state "
              << TcpSocketState::TcpCongStateName[n] << "\n";
}

void
ConnectDebug()
{
    Config::Connect("/NodeList/*/$ns3::TcpL4Protocol/SocketList/*/CongestionWindow",
                    MakeCallback(&CwndTrace));
    Config::Connect("/NodeList/*/$ns3::TcpL4Protocol/SocketList/*/CongState",
                    MakeCallback(&StateTrace));
}

void
LossDrop(Ptr<const Packet>)
{
    ++g_lossDrops;
}

// "20ms", "1.5s", ... as ns-3 Time strings; a bare number is in `unit`.
Time
ParseTime(const std::string& s, const std::string& unit)
{
    bool bare = !s.empty();
    for (char c : s)
    {
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
              c == '-' || c == '+'))
        {
            bare = false;
        }
    }
    return Time(bare ? s + unit : s);
}

std::string
TcpTypeName(const std::string& s)
{
    std::string l;
    for (char c : s)
    {
        l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (l == "cubic")
    {
        return "ns3::TcpCubic";
    }
    if (l == "newreno" || l == "reno")
    {
        return "ns3::TcpNewReno";
    }
    if (l == "vegas")
    {
        return "ns3::TcpVegas";
    }
    if (l == "linuxreno")
    {
        return "ns3::TcpLinuxReno";
    }
    if (s.rfind("ns3::", 0) == 0)
    {
        return s;
    }
    return "ns3::" + s;
}

std::string
JsonStr(const std::string& s)
{
    std::string o = "\"";
    for (char c : s)
    {
        if (c == '"' || c == '\\')
        {
            o += '\\';
        }
        o += c;
    }
    return o + "\"";
}

} // namespace

int
main(int argc, char* argv[])
{
    auto tSetup0 = std::chrono::steady_clock::now();

    uint32_t flows = 10;
    std::string rateStr = "1Gbps";
    std::string rttStr = "20ms";
    std::string accessRateStr = "10Gbps";
    std::string accessDelayStr = "1ms";
    int64_t bufferPkts = -1; // default: 1 BDP
    std::string durationStr = "30s";
    std::string tcp = "cubic";
    double loss = 0.0;
    uint64_t seed = 1;
    uint32_t mss = 1448;
    uint32_t initCwnd = 10;
    uint32_t delAckCount = 2;
    std::string delAckStr = "40ms";
    std::string minRtoStr = "200ms";
    uint32_t sockBuf = 32 * 1024 * 1024;
    uint32_t sendSize = 1448;
    std::string recovery = "prr";
    std::string startGapStr = "0ms";
    bool debugTrace = false;
    std::string tcp2;
    uint32_t flows2 = 0;
    std::string qdisc = "fifo";

    CommandLine cmd(__FILE__);
    cmd.Usage("ccbench bench: N bulk TCP flows over a droptail dumbbell; prints one JSON line.");
    cmd.AddValue("flows", "number of senders/flows", flows);
    cmd.AddValue("rate", "bottleneck rate (ns-3 DataRate: 1Gbps, 100Mbps, ...)", rateStr);
    cmd.AddValue("rtt", "base RTT (propagation only); bare number = ms", rttStr);
    cmd.AddValue("accessRate", "access link rate", accessRateStr);
    cmd.AddValue("accessDelay",
                 "one-way access-link delay; the bottleneck gets rtt/2 - accessDelay; bare = ms",
                 accessDelayStr);
    cmd.AddValue("bufferPkts",
                 "bottleneck droptail buffer in packets (default: 1 BDP of 1500-byte packets)",
                 bufferPkts);
    cmd.AddValue("duration", "simulated time; bare number = s", durationStr);
    cmd.AddValue("tcp", "cubic | newreno | linuxreno | any ns3::Tcp* congestion-ops type", tcp);
    cmd.AddValue("loss", "random per-packet loss probability at the bottleneck (forward only)", loss);
    cmd.AddValue("seed", "RNG run number (RngSeedManager::SetRun)", seed);
    cmd.AddValue("mss", "TCP payload bytes per segment (ns-3 SegmentSize)", mss);
    cmd.AddValue("initCwnd", "initial cwnd in segments", initCwnd);
    cmd.AddValue("delAckCount", "delayed ACK count", delAckCount);
    cmd.AddValue("delAck", "delayed ACK timeout; bare = ms", delAckStr);
    cmd.AddValue("minRto", "minimum RTO; bare = ms", minRtoStr);
    cmd.AddValue("sockBuf", "send and receive socket buffer, bytes", sockBuf);
    cmd.AddValue("sendSize", "BulkSend write size, bytes", sendSize);
    cmd.AddValue("recovery", "prr (ns-3 default) | classic", recovery);
    cmd.AddValue("startGap", "flow i starts at i*startGap; bare = ms", startGapStr);
    cmd.AddValue("tcp2", "a second congestion-ops type for the last flows2 flows (a mix)", tcp2);
    cmd.AddValue("flows2", "how many of the flows (the last ones) use tcp2", flows2);
    cmd.AddValue("qdisc", "bottleneck queue: fifo | fq_codel", qdisc);
    cmd.AddValue("debugTrace", "print cwnd and congestion-state changes on stderr", debugTrace);
    cmd.Parse(argc, argv);

    const DataRate rate(rateStr);
    const DataRate accessRate(accessRateStr);
    const Time rtt = ParseTime(rttStr, "ms");
    const Time accessDelay = ParseTime(accessDelayStr, "ms");
    const Time duration = ParseTime(durationStr, "s");
    const Time delAck = ParseTime(delAckStr, "ms");
    const Time minRto = ParseTime(minRtoStr, "ms");
    const Time startGap = ParseTime(startGapStr, "ms");
    const Time bnDelay = rtt / 2 - accessDelay;
    if (flows == 0 || bnDelay.IsNegative() || duration.IsZero() || loss < 0 || loss >= 1 ||
        (qdisc != "fifo" && qdisc != "fq_codel"))
    {
        std::cerr << "dumbbell: bad arguments (flows>0, accessDelay<=rtt/2, duration>0, "
                     "0<=loss<1, qdisc fifo or fq_codel)\n";
        return 2;
    }
    const uint32_t wirePkt = mss + 52; // IP packet: payload + 20 IP + 20 TCP + 12 TS option
    const double bdpPkts = rate.GetBitRate() * rtt.GetSeconds() / 8.0 / wirePkt;
    if (bufferPkts < 0)
    {
        bufferPkts = std::max<int64_t>(1, std::llround(bdpPkts));
    }
    const std::string tcpType = TcpTypeName(tcp);
    TypeId tcpTid;
    if (!TypeId::LookupByNameFailSafe(tcpType, &tcpTid))
    {
        std::cerr << "dumbbell: unknown TCP congestion control type " << tcpType << "\n";
        return 2;
    }

    TypeId tcp2Tid;
    if (flows2 > flows || (flows2 > 0 && !TypeId::LookupByNameFailSafe(TcpTypeName(tcp2), &tcp2Tid)))
    {
        std::cerr << "dumbbell: --flows2 must be at most --flows, with --tcp2 a known type\n";
        return 2;
    }

    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);

    // ---- TCP defaults -------------------------------------------------------
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(tcpTid));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(recovery == "classic" ? TcpClassicRecovery::GetTypeId()
                                                         : TcpPrrRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(initCwnd));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(delAckCount));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(delAck));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(sockBuf));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(sockBuf));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(minRto));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));

    // ---- topology -----------------------------------------------------------
    NodeContainer senders;
    senders.Create(flows);
    Ptr<Node> router = CreateObject<Node>();
    Ptr<Node> receiver = CreateObject<Node>();

    InternetStackHelper stack;
    stack.Install(senders);
    stack.Install(router);
    stack.Install(receiver);
    // A mix: the last flows2 senders create their sockets with tcp2.
    for (uint32_t i = flows - flows2; i < flows; ++i)
    {
        senders.Get(i)->GetObject<TcpL4Protocol>()->SetAttribute("SocketType", TypeIdValue(tcp2Tid));
    }

    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", DataRateValue(accessRate));
    access.SetChannelAttribute("Delay", TimeValue(accessDelay));
    access.SetQueue("ns3::DropTailQueue", "MaxSize", QueueSizeValue(QueueSize("1000000p")));

    PointToPointHelper bottleneck;
    bottleneck.SetDeviceAttribute("DataRate", DataRateValue(rate));
    bottleneck.SetChannelAttribute("Delay", TimeValue(bnDelay));
    const bool fqCodel = qdisc == "fq_codel";
    bottleneck.SetQueue("ns3::DropTailQueue",
                        "MaxSize",
                        QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, fqCodel ? 1 : bufferPkts)));

    TrafficControlHelper tch;
    Ipv4AddressHelper addr;

    std::vector<NetDeviceContainer> accessDevs;
    for (uint32_t i = 0; i < flows; ++i)
    {
        NetDeviceContainer d = access.Install(senders.Get(i), router);
        std::ostringstream net;
        net << "10." << (1 + i / 256) << "." << (i % 256) << ".0";
        addr.SetBase(net.str().c_str(), "255.255.255.0");
        addr.Assign(d);
        tch.Uninstall(d);
        accessDevs.push_back(d);
    }

    NetDeviceContainer bnDevs = bottleneck.Install(router, receiver); // 0: router, 1: receiver
    addr.SetBase("192.168.0.0", "255.255.255.0");
    Ipv4InterfaceContainer bnIfs = addr.Assign(bnDevs);
    tch.Uninstall(bnDevs);
    if (fqCodel)
    {
        TrafficControlHelper fq;
        fq.SetRootQueueDisc("ns3::FqCoDelQueueDisc",
                            "MaxSize",
                            QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, bufferPkts)));
        QueueDiscContainer qds = fq.Install(bnDevs);
        for (uint32_t i = 0; i < qds.GetN(); ++i)
        {
            // Not an attribute in 3.37; 0 (the default) would become the MTU.
            DynamicCast<FqCoDelQueueDisc>(qds.Get(i))->SetQuantum(1514);
        }
        bool ok = qds.Get(0)->TraceConnectWithoutContext("Drop",
                                                         MakeBoundCallback(&QdiscDrop, &g_bnQueueDrops));
        ok &= qds.Get(1)->TraceConnectWithoutContext("Drop", MakeBoundCallback(&QdiscDrop, &g_revQueueDrops));
        if (!ok)
        {
            std::cerr << "dumbbell: could not connect the FQ-CoDel drop traces\n";
            return 3;
        }
    }

    Ptr<PointToPointNetDevice> bnTx = DynamicCast<PointToPointNetDevice>(bnDevs.Get(0));
    Ptr<PointToPointNetDevice> bnRx = DynamicCast<PointToPointNetDevice>(bnDevs.Get(1));
    if (loss > 0)
    {
        Ptr<RateErrorModel> em = CreateObject<RateErrorModel>();
        em->SetUnit(RateErrorModel::ERROR_UNIT_PACKET);
        em->SetRate(loss);
        bnRx->SetAttribute("ReceiveErrorModel", PointerValue(em));
    }
    bool traced = true;
    traced &= bnTx->TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&BnTxEnd));
    traced &= bnTx->GetQueue()->TraceConnectWithoutContext("Drop", MakeCallback(&BnDrop));
    traced &= bnRx->GetQueue()->TraceConnectWithoutContext("Drop", MakeCallback(&RevDrop));
    traced &= bnRx->TraceConnectWithoutContext("PhyRxDrop", MakeCallback(&LossDrop));
    traced &= router->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext(
        "TcDrop",
        MakeCallback(&TcDrop));
    traced &= receiver->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext(
        "TcDrop",
        MakeCallback(&TcDropRev));
    if (!traced)
    {
        std::cerr << "dumbbell: could not connect a trace source\n";
        return 3;
    }

    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    // ---- applications -------------------------------------------------------
    const Ipv4Address dst = bnIfs.GetAddress(1);
    const uint16_t basePort = 5000;
    std::vector<Ptr<PacketSink>> sinks;
    std::vector<Time> starts;
    for (uint32_t i = 0; i < flows; ++i)
    {
        const Time start = startGap * static_cast<int64_t>(i);
        starts.push_back(start);
        PacketSinkHelper sinkH("ns3::TcpSocketFactory",
                               InetSocketAddress(Ipv4Address::GetAny(), basePort + i));
        ApplicationContainer sa = sinkH.Install(receiver);
        sa.Start(Seconds(0));
        sa.Stop(duration);
        sinks.push_back(DynamicCast<PacketSink>(sa.Get(0)));

        BulkSendHelper src("ns3::TcpSocketFactory", InetSocketAddress(dst, basePort + i));
        src.SetAttribute("MaxBytes", UintegerValue(0));
        src.SetAttribute("SendSize", UintegerValue(sendSize));
        ApplicationContainer ca = src.Install(senders.Get(i));
        ca.Start(start);
        ca.Stop(duration);
    }

    if (debugTrace)
    {
        Simulator::Schedule(MicroSeconds(1), &ConnectDebug);
    }
    Simulator::Stop(duration);
    auto tRun0 = std::chrono::steady_clock::now();
    Simulator::Run();
    auto tRun1 = std::chrono::steady_clock::now();
    const uint64_t events = Simulator::GetEventCount();

    // ---- results --------------------------------------------------------------
    std::vector<uint64_t> bytes(flows);
    std::vector<double> gp(flows);
    double sum = 0, sumSq = 0;
    uint64_t totalBytes = 0;
    for (uint32_t i = 0; i < flows; ++i)
    {
        bytes[i] = sinks[i]->GetTotalRx();
        const double active = (duration - starts[i]).GetSeconds();
        gp[i] = active > 0 ? bytes[i] * 8.0 / active : 0.0;
        totalBytes += bytes[i];
        sum += gp[i];
        sumSq += gp[i] * gp[i];
    }
    const double jain = sumSq > 0 ? sum * sum / (flows * sumSq) : 0.0;
    Simulator::Destroy();
    auto tEnd = std::chrono::steady_clock::now();

    const double runWall = std::chrono::duration<double>(tRun1 - tRun0).count();
    const double setupWall = std::chrono::duration<double>(tRun0 - tSetup0).count();
    const double totalWall = std::chrono::duration<double>(tEnd - tSetup0).count();

    std::ostringstream o;
    o.precision(10);
    o << "{\"simulator\":\"ns-3\",\"ns3_version\":\"3.37\"";
    o << ",\"scenario\":{\"flows\":" << flows << ",\"rate_bps\":" << rate.GetBitRate()
      << ",\"rtt_ns\":" << rtt.GetNanoSeconds()
      << ",\"access_rate_bps\":" << accessRate.GetBitRate()
      << ",\"access_delay_ns\":" << accessDelay.GetNanoSeconds()
      << ",\"bottleneck_delay_ns\":" << bnDelay.GetNanoSeconds()
      << ",\"buffer_pkts\":" << bufferPkts << ",\"bdp_pkts\":" << bdpPkts
      << ",\"duration_ns\":" << duration.GetNanoSeconds() << ",\"tcp\":" << JsonStr(tcpType)
      << ",\"loss\":" << loss << ",\"seed\":" << seed << ",\"mss\":" << mss
      << ",\"init_cwnd\":" << initCwnd << ",\"delack_count\":" << delAckCount
      << ",\"delack_ns\":" << delAck.GetNanoSeconds() << ",\"min_rto_ns\":" << minRto.GetNanoSeconds()
      << ",\"sock_buf_bytes\":" << sockBuf << ",\"sack\":true,\"timestamps\":true"
      << ",\"recovery\":" << JsonStr(recovery == "classic" ? "classic" : "prr")
      << ",\"start_gap_ns\":" << startGap.GetNanoSeconds() << ",\"qdisc\":" << JsonStr(qdisc)
      << ",\"ip_pkt_bytes\":" << wirePkt << ",\"wire_pkt_bytes\":" << (wirePkt + 2) << "}";
    o << ",\"flows\":[";
    for (uint32_t i = 0; i < flows; ++i)
    {
        const bool second = i >= flows - flows2;
        o << (i ? "," : "") << "{\"flow_id\":" << i
          << ",\"tcp\":" << JsonStr(second ? TcpTypeName(tcp2) : tcpType) << ",\"bytes_delivered\":" << bytes[i]
          << ",\"goodput_bps\":" << gp[i] << "}";
    }
    o << "]";
    o << ",\"aggregate_goodput_bps\":" << sum << ",\"total_bytes_delivered\":" << totalBytes
      << ",\"jain\":" << jain << ",\"bottleneck_pkts\":" << g_bnTxPkts
      << ",\"bottleneck_wire_bytes\":" << g_bnTxBytes
      << ",\"bottleneck_utilization\":" << (g_bnTxBytes * 8.0 / rate.GetBitRate() / duration.GetSeconds())
      << ",\"bottleneck_queue_drops\":" << g_bnQueueDrops
      << ",\"reverse_queue_drops\":" << g_revQueueDrops << ",\"random_loss_drops\":" << g_lossDrops
      << ",\"events\":" << events << ",\"wall_run_s\":" << runWall << ",\"wall_setup_s\":" << setupWall
      << ",\"wall_total_s\":" << totalWall << "}";
    std::cout << o.str() << std::endl;
    return 0;
}
