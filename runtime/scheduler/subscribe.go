package scheduler

import (
	"context"
	"fmt"

	"github.com/valkey-io/valkey-go"
)

// ValkeySubscriber returns a SubscribeFunc that SUBSCRIBEs to channel on a
// dedicated connection of c. The subscription is the only Valkey command
// the scheduler issues itself; everything else goes through the store.
func ValkeySubscriber(c valkey.Client, channel string) SubscribeFunc {
	return func(ctx context.Context, onReady func(), onMessage func(string)) error {
		dc, release := c.Dedicate()
		defer release()
		broken := dc.SetPubSubHooks(valkey.PubSubHooks{
			OnMessage: func(m valkey.PubSubMessage) { onMessage(m.Message) },
			OnSubscription: func(s valkey.PubSubSubscription) {
				if s.Kind == "subscribe" && onReady != nil {
					onReady()
				}
			},
		})
		if err := dc.Do(ctx, dc.B().Subscribe().Channel(channel).Build()).Error(); err != nil {
			return fmt.Errorf("subscribe %s: %w", channel, err)
		}
		select {
		case err := <-broken:
			return fmt.Errorf("subscription %s: %w", channel, err)
		case <-ctx.Done():
			return nil
		}
	}
}
