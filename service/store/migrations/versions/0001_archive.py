"""The archive: matches, their seats and rounds, tournaments.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

#: ids compare byte by byte, as Redis orders the members of equal score (listings merge both)
ID = sa.Text(collation="C")


def upgrade() -> None:
    op.create_table(
        "matches",
        sa.Column("id", ID, primary_key=True),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("ruleset", sa.Text, nullable=False),
        sa.Column("players", sa.SmallInteger, nullable=False),
        sa.Column("rated", sa.Boolean, nullable=False),
        sa.Column("tournament_id", sa.Text),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("ended_ms", sa.BigInteger, nullable=False),
        sa.Column("seed", sa.Text),
        sa.Column("scores", JSONB, nullable=False),
        sa.Column("winners", JSONB),
        sa.Column("record", JSONB),
        sa.Column("rating_changes", JSONB),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("settings", sa.Text, nullable=False),
        sa.Column("state", sa.LargeBinary, nullable=False),
        sa.Column("live", sa.Text, nullable=False),
        sa.Column("event_id", sa.Text, nullable=False),
        sa.Column("sealed", sa.Boolean, nullable=False),
        sa.Column("archived_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("matches_newest", "matches", [sa.text("created_ms DESC"), sa.text("id DESC")])
    op.create_index("matches_tournament", "matches", ["tournament_id", sa.text("created_ms DESC")])
    op.create_table(
        "match_seats",
        sa.Column("match_id", ID, sa.ForeignKey("matches.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seat", sa.SmallInteger, primary_key=True),
        sa.Column("bot_id", sa.Text),
        sa.Column("bot_name", sa.Text),
        sa.Column("house", sa.Text),
        sa.Column("score", sa.Integer, nullable=False),
        sa.Column("place", sa.SmallInteger),
        sa.Column("timeouts", sa.Integer, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("ruleset", sa.Text, nullable=False),
    )
    op.create_index(
        "match_seats_bot_newest", "match_seats", ["bot_id", sa.text("created_ms DESC"), sa.text("match_id DESC")]
    )
    op.create_table(
        "match_rounds",
        sa.Column("match_id", ID, sa.ForeignKey("matches.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("round", sa.SmallInteger, primary_key=True),
        sa.Column("seat", sa.SmallInteger, primary_key=True),
        sa.Column("bid", sa.SmallInteger, nullable=False),
        sa.Column("tricks", sa.SmallInteger, nullable=False),
        sa.Column("points", sa.Integer, nullable=False),
    )
    op.create_table(
        "tournaments",
        sa.Column("id", ID, primary_key=True),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("ruleset", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("ended_ms", sa.BigInteger, nullable=False),
        sa.Column("document", JSONB, nullable=False),
        sa.Column("standings", JSONB, nullable=False),
    )
    op.create_index("tournaments_newest", "tournaments", [sa.text("created_ms DESC"), sa.text("id DESC")])


def downgrade() -> None:
    op.drop_table("tournaments")
    op.drop_table("match_rounds")
    op.drop_table("match_seats")
    op.drop_table("matches")
