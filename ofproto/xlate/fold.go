package xlate

import "github.com/vswitch-go/vswitch/datapath/actions"

// foldVLANPairs removes, in place, every tag that is pushed and popped
// again with nothing but rewrites of that tag in between: nothing saw the
// tag, so the packet leaves as if it had never had it. Pipelines built of
// independent tables produce such pairs (Faucet's pushes the port's VLAN
// in its ingress table and pops it again in its egress table, giving
// push_vlan, set(vlan), pop_vlan, output); the megaflow is the same, the
// actions shorter, and each packet is spared moving its headers twice.
func foldVLANPairs(acts actions.List) actions.List {
	out := acts[:0]
	for i := 0; i < len(acts); i++ {
		if acts[i].Kind == actions.PushVLAN {
			j := i + 1
			for j < len(acts) && acts[j].Kind == actions.SetVLANTCI {
				j++
			}
			if j < len(acts) && acts[j].Kind == actions.PopVLAN {
				i = j
				continue
			}
		}
		out = append(out, acts[i])
	}
	return out
}
