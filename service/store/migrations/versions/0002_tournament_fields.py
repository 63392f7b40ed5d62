"""Archived tournaments keep their Redis fields, so that they are read back from the archive
once their keys have left Redis.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tournaments", sa.Column("stored", JSONB))


def downgrade() -> None:
    op.drop_column("tournaments", "stored")
