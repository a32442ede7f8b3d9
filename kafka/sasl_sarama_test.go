package kafka

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/logd-dev/logd/auth"
)

// saramaSCRAM is sarama's SCRAMClient over franz-go's SCRAM client (a
// test dependency already), for SCRAMClientGeneratorFunc.
type saramaSCRAM struct {
	sha512 bool
	sess   sasl.Session
	first  []byte
	done   bool
}

func (s *saramaSCRAM) Begin(user, password, _ string) error {
	a := scram.Auth{User: user, Pass: password}
	m := a.AsSha256Mechanism()
	if s.sha512 {
		m = a.AsSha512Mechanism()
	}
	var err error
	s.sess, s.first, err = m.Authenticate(context.Background(), "")
	return err
}

func (s *saramaSCRAM) Step(challenge string) (string, error) {
	if s.first != nil {
		out := s.first
		s.first = nil
		return string(out), nil
	}
	done, next, err := s.sess.Challenge([]byte(challenge))
	s.done = done
	return string(next), err
}

func (s *saramaSCRAM) Done() bool { return s.done }

// saramaSASL is a sarama configuration over the node's TLS with SASL.
func saramaSASL(sn *secureNode, mech sarama.SASLMechanism, user, password string) *sarama.Config {
	cfg := saramaConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, sn.ca.ClientConfig(tls0)
	cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, mech
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, password
	switch mech {
	case sarama.SASLTypeSCRAMSHA256:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	case sarama.SASLTypeSCRAMSHA512:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{sha512: true} }
	}
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Metadata.Retry.Max = 1
	return cfg
}

// TestSaramaSASL authenticates sarama with PLAIN (a token) and
// SCRAM-SHA-256 and SCRAM-SHA-512 (credentials set by sarama's
// ClusterAdmin, UpsertUserScramCredentials): each produces and consumes
// its topic under ACLs that allow exactly that; DescribeUserScramCredentials
// lists them; a wrong password is refused.
func TestSaramaSASL(t *testing.T) {
	sn := startSASLNode(t, Mechanisms...)
	sn.setSCRAM("admin", "admin-pw", auth.SCRAMSHA512)
	adminCfg := saramaSASL(sn, sarama.SASLTypeSCRAMSHA512, "admin", "admin-pw")
	adm, err := sarama.NewClusterAdmin([]string{sn.tls}, adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	salt := sha256.Sum256([]byte("salt"))
	res, err := adm.UpsertUserScramCredentials([]sarama.AlterUserScramCredentialsUpsert{
		{Name: "sam", Mechanism: sarama.SCRAM_MECHANISM_SHA_256, Iterations: 4096, Salt: salt[:], Password: []byte("sam-pw")},
		{Name: "sue", Mechanism: sarama.SCRAM_MECHANISM_SHA_512, Iterations: 8192, Salt: salt[:], Password: []byte("sue-pw")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.ErrorCode != sarama.ErrNoError {
			t.Fatalf("upsert %s: %v", r.User, r.ErrorCode)
		}
	}
	described, err := adm.DescribeUserScramCredentials([]string{"sam", "sue"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range described {
		for _, c := range d.CredentialInfos {
			got = append(got, d.User+"/"+c.Mechanism.String()+"/"+string(rune('0'+c.Iterations/4096)))
		}
	}
	slices.Sort(got)
	if want := []string{"sam/SCRAM-SHA-256/1", "sue/SCRAM-SHA-512/2"}; !slices.Equal(got, want) {
		t.Fatalf("described %q, want %q", got, want)
	}

	tom := sn.newToken("User:tom")
	sn.createTopic("sarama-other", 1, nil)
	for _, c := range []struct {
		user, password string
		mech           sarama.SASLMechanism
	}{
		{"tom", tom, sarama.SASLTypePlaintext},
		{"sam", "sam-pw", sarama.SASLTypeSCRAMSHA256},
		{"sue", "sue-pw", sarama.SASLTypeSCRAMSHA512},
	} {
		topic := "sarama-" + c.user
		sn.createTopic(topic, 1, nil)
		sn.grant("User:"+c.user, topic, auth.OpWrite, auth.OpRead, auth.OpDescribe)
		cfg := saramaSASL(sn, c.mech, c.user, c.password)
		p, err := sarama.NewSyncProducer([]string{sn.tls}, cfg)
		if err != nil {
			t.Fatalf("%s (%s): %v", c.user, c.mech, err)
		}
		for i := range 3 {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(c.user + string(rune('a'+i)))}); err != nil {
				t.Fatalf("%s: produce: %v", c.user, err)
			}
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sarama-other", Value: sarama.StringEncoder("x")}); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
			t.Errorf("%s: produce to sarama-other: %v; want TOPIC_AUTHORIZATION_FAILED", c.user, err)
		}
		p.Close()
		cons, err := sarama.NewConsumer([]string{sn.tls}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			select {
			case m := <-pc.Messages():
				if want := c.user + string(rune('a'+i)); string(m.Value) != want {
					t.Fatalf("%s: consumed %q, want %q", c.user, m.Value, want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: consumed %d of 3", c.user, i)
			}
		}
		pc.Close()
		cons.Close()
	}

	cfg := saramaSASL(sn, sarama.SASLTypeSCRAMSHA256, "sam", "nope")
	if _, err := sarama.NewClient([]string{sn.tls}, cfg); err == nil {
		t.Fatal("a wrong SCRAM password connected")
	}
}
