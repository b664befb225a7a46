package storage

import (
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/proto"
)

// Inspect fills res with what eng holds for viewer (fcapctl keys), at
// most proto.MaxInspectKeys counters and devices and the newest
// proto.MaxInspectValues values of each counter. It leaves res.Found
// false when eng holds nothing of the viewer.
func Inspect(eng *engine.Engine, viewer string, res *proto.ViewerState) {
	st, ok := eng.Viewer(viewer)
	if !ok {
		return
	}
	res.Found = true
	res.Reservations = uint64(st.Reservations)
	res.RememberedIDs = uint64(st.RememberedIDs)
	res.LinkedTo = st.LinkedTo
	res.Devices = st.Devices
	if len(res.Devices) > proto.MaxInspectKeys {
		res.Devices = res.Devices[:proto.MaxInspectKeys]
	}
	for i, k := range st.Keys {
		if i == proto.MaxInspectKeys {
			break
		}
		ki := proto.KeyInfo{Hash: k.Hash, Algorithm: uint8(k.Algorithm), Window: k.Window, Limit: int64(k.Limit), Bucket: k.Bucket}
		ki.Name, _ = eng.CounterName(k.Hash)
		if k.Lane {
			ki.Name = "(another region's lane)" // its hash mixes the cap key with the region's name
		}
		ki.Values = k.Values()
		if len(ki.Values) > proto.MaxInspectValues {
			ki.Values = ki.Values[len(ki.Values)-proto.MaxInspectValues:]
		}
		res.Keys = append(res.Keys, ki)
	}
}
