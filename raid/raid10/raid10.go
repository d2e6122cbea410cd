package raid10

import (
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/mirror"
	"github.com/raidd/raidd/stripe"
)

func init() { raid.Register(stripe.RAID10, mirror.New) }
